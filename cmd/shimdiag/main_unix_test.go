//go:build !windows

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/ttrpc"

	"github.com/openhcs/runhcs/protocols/diag"
)

// fakeShim answers the diag service with fixed data.
type fakeShim struct{}

func (fakeShim) DiagExecInHost(context.Context, *diag.ExecProcessRequest) (*diag.ExecProcessResponse, error) {
	return nil, errdefs.ErrNotImplemented
}
func (fakeShim) DiagShare(context.Context, *diag.ShareRequest) (*diag.ShareResponse, error) {
	return nil, errdefs.ErrNotImplemented
}
func (fakeShim) DiagStacks(context.Context, *diag.StacksRequest) (*diag.StacksResponse, error) {
	return &diag.StacksResponse{Stacks: "goroutine 1 [running]:\nmain.main()\n"}, nil
}
func (fakeShim) DiagTasks(_ context.Context, req *diag.TasksRequest) (*diag.TasksResponse, error) {
	t := &diag.Task{Id: "c1"}
	if req.GetExecs() {
		t.Execs = []*diag.Exec{{Id: "c1", State: "running"}, {Id: "e1", State: "created"}}
	}
	return &diag.TasksResponse{Tasks: []*diag.Task{t}}, nil
}
func (fakeShim) DiagPid(context.Context, *diag.PidRequest) (*diag.PidResponse, error) {
	return &diag.PidResponse{Pid: 4242}, nil
}

// serve serves a ttrpc server on a unix socket in a temporary folder and returns its address
// as the shim's start action records it (unix://<path>). withDiag registers the diag service;
// without it the server is like another runtime's shim.
func serve(t *testing.T, withDiag bool) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "shimdiag") // short: unix socket paths are limited to 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ttrpc.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	if withDiag {
		diag.RegisterShimDiagService(server, fakeShim{})
	}
	done := make(chan struct{})
	go func() { _ = server.Serve(context.Background(), l); close(done) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = server.Shutdown(ctx)
		<-done
	})
	return "unix://" + path
}

func TestCommands(t *testing.T) {
	addr := serve(t, true)
	other := serve(t, false)
	state := t.TempDir()
	writeBundle(t, state, "default", "c1", map[string]string{"address": addr})
	writeBundle(t, state, "default", "r1", map[string]string{"address": other})
	writeBundle(t, state, "default", "gone", map[string]string{"address": "unix:///nonexistent/socket"})

	tests := []struct {
		args    []string
		want    []string // substrings of stdout, with runs of spaces as one space
		wantErr string   // substring of the error; "" for success
	}{
		{args: []string{"pid", addr}, want: []string{"4242\n"}},
		{args: []string{"pid", strings.TrimPrefix(addr, "unix://")}, want: []string{"4242\n"}},
		{args: []string{"stacks", addr}, want: []string{"goroutine 1 [running]"}},
		{args: []string{"tasks", addr}, want: []string{"TASK", "c1 c1 running", "c1 e1 created"}},
		{args: []string{"tasks", "--execs=false", addr}, want: []string{"c1\n"}},
		{args: []string{"list", "--state-dir", state}, want: []string{
			"NAMESPACE", "default 4242 " + addr + " c1",
			"(no diag service)", "(not answering)",
		}},
		{args: []string{"list", "--state-dir", state, "--namespace", "k8s.io"}, want: []string{"NAMESPACE"}},
		{args: []string{"pid", other}, wantErr: "does not serve containerd.runhcs.v1.diag.ShimDiag"},
		{args: []string{"pid", "unix:///nonexistent/socket"}, wantErr: "connect to shim unix:///nonexistent/socket"},
		{args: []string{"pid"}, wantErr: "usage"},
		{args: []string{"frob"}, wantErr: "usage"},
		{args: []string{"list", "--state-dir", filepath.Join(state, "missing")}, wantErr: "no task bundles"},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errOut bytes.Buffer
			err := run(context.Background(), tc.args, &out, &errOut)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if errors.Is(err, errUsage) && errOut.Len() == 0 {
					t.Errorf("usage error printed nothing")
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v (stderr %q)", err, errOut.String())
			}
			got := squeeze(out.String())
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	// The list line of the shim without the diag service names its task.
	var out bytes.Buffer
	if err := run(context.Background(), []string{"list", "--state-dir", state}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("(no diag service) %s r1", other); !strings.Contains(squeeze(out.String()), want) {
		t.Errorf("list lacks %q:\n%s", want, out.String())
	}
}

// squeeze turns every run of spaces into one, so that checks do not depend on column widths.
func squeeze(s string) string {
	for strings.Contains(s, "  ") {
		s = strings.ReplaceAll(s, "  ", " ")
	}
	return s
}
