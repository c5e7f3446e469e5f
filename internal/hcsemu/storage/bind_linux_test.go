package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/testenv"
)

// TestBindMappings: the bind filter's host-wide mappings (BfSetupFilter, BfRemoveMapping) as
// bind mounts: the target's files at the root (a folder's, or a single file's), read-only when asked; a second mapping at a root
// refused; removal undoes the mount and the root made for it; Close removes what is left; bad
// arguments are refused naming the field.
func TestBindMappings(t *testing.T) {
	testenv.RequireRoot(t, "bind mounts")
	ctx := context.Background()
	dir := t.TempDir()
	f, err := New(ctx, filepath.Join(dir, "emu"))
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "root")
	if err := f.BindSetup(ctx, wire.BindArgs{Root: root, Target: src}); err != nil {
		t.Fatalf("BindSetup: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "f")); err != nil || string(b) != "x" {
		t.Errorf("through the mapping: %q, %v", b, err)
	}
	if err := f.BindSetup(ctx, wire.BindArgs{Root: root, Target: src}); err == nil {
		t.Errorf("a second mapping at %s: no error", root)
	}
	if err := f.BindRemove(ctx, wire.BindArgs{Root: root}); err != nil {
		t.Fatalf("BindRemove: %v", err)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the root after BindRemove: %v, want it gone", err)
	}
	var he *hresult.Error
	if err := f.BindRemove(ctx, wire.BindArgs{Root: root}); !errors.As(err, &he) || he.HResult != hresult.ErrNotFound {
		t.Errorf("BindRemove of a root without a mapping: %v, want ERROR_NOT_FOUND", err)
	}

	// A single file onto a file path (kubelet's c:\dev\termination-log in a HostProcess
	// container): the root is made as a file and removed with the mapping.
	fileRoot := filepath.Join(dir, "termination-log")
	if err := f.BindSetup(ctx, wire.BindArgs{Root: fileRoot, Target: filepath.Join(src, "f")}); err != nil {
		t.Fatalf("BindSetup of a file: %v", err)
	}
	if err := os.WriteFile(fileRoot, []byte("written through"), 0o644); err != nil {
		t.Fatalf("writing through a file's mapping: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(src, "f")); string(b) != "written through" {
		t.Errorf("the target file after a write through its mapping: %q", b)
	}
	if err := f.BindRemove(ctx, wire.BindArgs{Root: fileRoot}); err != nil {
		t.Fatalf("BindRemove of a file's mapping: %v", err)
	}
	if _, err := os.Stat(fileRoot); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file mapping's root after BindRemove: %v, want it gone", err)
	}

	ro := filepath.Join(dir, "ro")
	if err := f.BindSetup(ctx, wire.BindArgs{Root: ro, Target: src, ReadOnly: true}); err != nil {
		t.Fatalf("BindSetup read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ro, "g"), nil, 0o644); err == nil {
		t.Errorf("writing through a read-only mapping: no error")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(ro); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a mapping's root after Close: %v, want it gone", err)
	}

	f2, err := New(ctx, filepath.Join(dir, "emu2"))
	if err != nil {
		t.Fatal(err)
	}
	defer f2.Close(ctx)
	for _, tc := range []struct {
		args  wire.BindArgs
		field string
	}{
		{wire.BindArgs{Root: "rel", Target: src}, "root"},
		{wire.BindArgs{Root: filepath.Join(dir, "nope", "r"), Target: src}, "root"},
		{wire.BindArgs{Root: root, Target: "rel"}, "target"},
		{wire.BindArgs{Root: root, Target: filepath.Join(dir, "missing")}, "target"},
		{wire.BindArgs{Root: root, Target: `\\?\Volume{00000000-0000-0000-0000-000000000001}\`}, "target"},
	} {
		err := f2.BindSetup(ctx, tc.args)
		if err == nil || len(err.Error()) < len(tc.field) || err.Error()[:len(tc.field)] != tc.field {
			t.Errorf("BindSetup %+v: %v; want an error naming %s", tc.args, err, tc.field)
		}
	}
}
