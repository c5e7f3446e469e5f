package shim

import (
	"fmt"
	"io"
	"net"
	"sync"

	winio "github.com/Microsoft/go-winio"
)

// taskLogPipe is the pipe containerd reads a task's shim log from (containerd's pkg/shim
// openLog serves the same name for the shim's own task).
func taskLogPipe(namespace, id string) string {
	return fmt.Sprintf(`\\.\pipe\containerd-shim-%s-%s-log`, namespace, id)
}

// openTaskLog listens on the task's log pipe and holds what connects (containerd, again after
// a restart) until closed.
func openTaskLog(namespace, id string) (io.Closer, error) {
	l, err := winio.ListenPipe(taskLogPipe(namespace, id), nil)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", taskLogPipe(namespace, id), err)
	}
	p := &logPipe{l: l}
	go p.accept()
	return p, nil
}

type logPipe struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
	done  bool
}

func (p *logPipe) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns = append(p.conns, c)
		p.mu.Unlock()
	}
}

func (p *logPipe) Close() error {
	p.mu.Lock()
	p.done = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	err := p.l.Close()
	for _, c := range conns {
		c.Close()
	}
	return err
}
