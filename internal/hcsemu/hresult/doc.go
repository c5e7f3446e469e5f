// Package hresult is the emulator's leaf for failing as HCS and HNS fail: Error, the HRESULT
// and message every emulated call returns; Decode, the strict decoding of HCS and HCN documents
// that names the field at fault; and NewGUID, the ids HNS objects and volumes get. It imports
// internal/computecore (the HRESULTs) and the standard library only; every other emulator
// package imports it.
package hresult
