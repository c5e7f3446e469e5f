package main

// windowsPaths: this build opens Windows paths as they are.
const windowsPaths = true
