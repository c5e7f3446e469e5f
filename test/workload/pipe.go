package main

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// pipePrefix starts every named pipe path.
const pipePrefix = `\\.\pipe\`

// pipeCall opens the named pipe path, sends msg and a newline, and prints the one-line answer.
func pipeCall(path, msg string, stdout io.Writer) error {
	name, ok := strings.CutPrefix(strings.ToLower(path), strings.ToLower(pipePrefix))
	if !ok || name == "" {
		return usageError{fmt.Sprintf(`%q is not a named pipe path (\\.\pipe\NAME)`, path)}
	}
	c, err := openPipe(path, name)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return fmt.Errorf("write to %s: %w", path, err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read the answer from %s: %w", path, err)
	}
	_, err = io.WriteString(stdout, line)
	return err
}
