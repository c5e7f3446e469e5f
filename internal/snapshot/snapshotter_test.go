package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestMountShape checks the mounts byte for byte against the shape of containerd's windows
// snapshotter (plugins/snapshots/windows/windows.go, mounts(), containerd v2.4.2).
func TestMountShape(t *testing.T) {
	ctx := context.Background()
	sn := newSnapshotter(t)
	dir := func(id string) string { return filepath.Join(sn.Root(), "snapshots", id) }

	base, err := sn.Prepare(ctx, "base-active", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []mount.Mount{{Type: "windows-layer", Source: dir("1"), Options: []string{"rw"}}}
	if !reflect.DeepEqual(base, want) {
		t.Fatalf("parentless Prepare = %#v\nwant %#v", base, want)
	}
	if err := sn.Commit(ctx, "base", "base-active"); err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Prepare(ctx, "mid-active", "base"); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, "mid", "mid-active"); err != nil {
		t.Fatal(err)
	}
	// containerd builds the option as mount.ParentLayerPathsFlag + json.Marshal(parent paths),
	// so a Windows path's backslashes come out escaped (C:\\x): build it the same way here.
	parents, err := json.Marshal([]string{dir("2"), dir("1")})
	if err != nil {
		t.Fatal(err)
	}
	parentsOption := "parentLayerPaths=" + string(parents)
	tests := []struct {
		name string
		call func() ([]mount.Mount, error)
		want []string
	}{
		{"prepare over two", func() ([]mount.Mount, error) { return sn.Prepare(ctx, "c", "mid") },
			[]string{"rw", parentsOption}},
		{"view over two", func() ([]mount.Mount, error) { return sn.View(ctx, "v", "mid") },
			[]string{"ro", parentsOption}},
		{"mounts again", func() ([]mount.Mount, error) { return sn.Mounts(ctx, "c") },
			[]string{"rw", parentsOption}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || m[0].Type != MountType || !reflect.DeepEqual(m[0].Options, tc.want) {
				t.Fatalf("mounts = %#v, want options %q", m, tc.want)
			}
			lm, err := ParseMounts(m)
			if err != nil || !reflect.DeepEqual(lm.Parents, []string{dir("2"), dir("1")}) {
				t.Fatalf("ParseMounts = %+v, %v", lm, err)
			}
		})
	}
	// encoding/json escapes <, > and & in strings: containerd's mounts do too, so a path with
	// them must come out escaped the same way.
	if got := layerMounts("s", []string{`C:\a&b<c>`}, false)[0].Options[1]; got != `parentLayerPaths=["C:\\a\u0026b\u003cc\u003e"]` {
		t.Fatalf("escaping: %s", got)
	}
	// The exact bytes of a Windows chain, as containerd's windows snapshotter writes them.
	if got := layerMounts(`C:\ProgramData\containerd\snapshots\3`, []string{`C:\ProgramData\containerd\snapshots\2`, `C:\ProgramData\containerd\snapshots\1`}, false)[0].Options; !reflect.DeepEqual(got, []string{"rw", `parentLayerPaths=["C:\\ProgramData\\containerd\\snapshots\\2","C:\\ProgramData\\containerd\\snapshots\\1"]`}) {
		t.Fatalf("Windows chain: %q", got)
	}
}

func TestLabels(t *testing.T) {
	ctx := context.Background()
	sn := newSnapshotter(t)
	if _, err := sn.Prepare(ctx, "base-active", ""); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, "base", "base-active"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		labels map[string]string
		err    error
	}{
		{map[string]string{LabelRootfsSizeBytes: "21474836480"}, nil},
		{map[string]string{LabelRootfsSizeGB: "20"}, nil},
		{map[string]string{LabelRootfsSizeBytes: "lots"}, errdefs.ErrInvalidArgument},
		{map[string]string{LabelRootfsSizeGB: "-1"}, errdefs.ErrInvalidArgument},
		{map[string]string{LabelUVMScratch: ""}, errdefs.ErrFailedPrecondition}, // base has no UtilityVM
	}
	for i, tc := range tests {
		t.Run(fmt.Sprint(tc.labels), func(t *testing.T) {
			key := fmt.Sprintf("c%d", i)
			_, err := sn.Prepare(ctx, key, "base", snapshots.WithLabels(tc.labels))
			if tc.err == nil && err != nil || tc.err != nil && !errors.Is(err, tc.err) {
				t.Fatalf("Prepare = %v, want %v", err, tc.err)
			}
			if err != nil {
				if _, serr := sn.Stat(ctx, key); !errdefs.IsNotFound(serr) {
					t.Fatalf("failed Prepare left snapshot %q: %v", key, serr)
				}
				return
			}
			info, err := sn.Stat(ctx, key)
			if err != nil || !reflect.DeepEqual(info.Labels, tc.labels) {
				t.Fatalf("Stat labels = %v, %v", info.Labels, err)
			}
		})
	}
	// With a utility VM image in the base layer, the label makes the utility VM's scratch in
	// vm/: a scratch layer folder under the emulator, vm\sandbox.vhdx on Windows.
	id, _, _, _ := statID(t, sn, "base")
	base := filepath.Join(sn.Root(), "snapshots", id)
	makeUVMBase(t, base)
	m, err := sn.Prepare(ctx, "uvm", "base", snapshots.WithLabels(map[string]string{LabelUVMScratch: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	checkUVMScratch(t, m[0].Source, base)
}

func statID(t *testing.T, sn *Snapshotter, key string) (string, snapshots.Info, snapshots.Usage, error) {
	t.Helper()
	var (
		id   string
		info snapshots.Info
	)
	err := sn.Walk(context.Background(), func(ctx context.Context, i snapshots.Info) error {
		if i.Name == key {
			info = i
		}
		return nil
	})
	m, _ := sn.View(context.Background(), "probe-"+key, key)
	lm, _ := ParseMounts(m)
	id = filepath.Base(lm.Parents[0])
	_ = sn.Remove(context.Background(), "probe-"+key)
	return id, info, snapshots.Usage{}, err
}

func TestDifferNotImplemented(t *testing.T) {
	ctx := context.Background()
	d := NewDiffer(newStore(t), testLayers)
	overlay := []mount.Mount{{Type: "overlay", Source: "overlay", Options: []string{"lowerdir=/a"}}}
	if _, err := d.Apply(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip}, overlay); !errdefs.IsNotImplemented(err) {
		t.Fatalf("Apply on overlay mounts = %v", err)
	}
	if _, err := d.Compare(ctx, nil, overlay); !errdefs.IsNotImplemented(err) {
		t.Fatalf("Compare on overlay mounts = %v", err)
	}
	wl := layerMounts(t.TempDir(), nil, false)
	if _, err := d.Apply(ctx, ocispec.Descriptor{MediaType: "application/vnd.oci.image.config.v1+json"}, wl); !errdefs.IsNotImplemented(err) {
		t.Fatalf("Apply of a config blob = %v", err)
	}
	if _, err := d.Apply(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayerGzip + "+encrypted"}, wl); !errdefs.IsNotImplemented(err) {
		t.Fatalf("Apply of an encrypted layer = %v", err)
	}
	if _, err := NewDiffer(nil, testLayers).Apply(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer}, wl); !errdefs.IsUnavailable(err) {
		t.Fatalf("Apply without a content store = %v", err)
	}
}

// TestParallel prepares over one parent and applies to different snapshots at once.
func TestParallel(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	sn := newSnapshotter(t)
	cs := newStore(t)
	d := NewDiffer(cs, testLayers)
	blob := gzipBlob(t, cs, layerTar(t, file{"Files/a.txt", "a"}, file{"Files/b.txt", "b"}))
	if _, err := sn.Prepare(ctx, "base-active", ""); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, "base", "base-active"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := 0; i < 20; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := sn.Prepare(ctx, fmt.Sprintf("ctr%d", i), "base"); err != nil {
				errs <- err
			}
		}()
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("extract-%d", i)
			m, err := sn.Prepare(ctx, key, "base")
			if err == nil {
				_, err = d.Apply(ctx, blob, m)
			}
			if err == nil {
				err = sn.Commit(ctx, fmt.Sprintf("layer%d", i), key)
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	n := 0
	_ = sn.Walk(ctx, func(context.Context, snapshots.Info) error { n++; return nil })
	if n != 41 { // base, 20 containers, 20 layers
		t.Fatalf("%d snapshots after parallel prepares, want 41", n)
	}
	// The same key twice at once: exactly one wins.
	var ok, exists int
	var mu sync.Mutex
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := sn.Prepare(ctx, "same", "base")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errdefs.IsAlreadyExists(err):
				exists++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok != 1 || exists != 7 {
		t.Fatalf("same key: %d created, %d already exists", ok, exists)
	}
}

// TestLeftoverFolder: a crash between creating a snapshot's folder and committing its
// metadata leaves a folder whose id the store hands out again.
func TestLeftoverFolder(t *testing.T) {
	ctx := context.Background()
	sn := newSnapshotter(t)
	leftover := filepath.Join(sn.Root(), "snapshots", "1")
	if err := os.MkdirAll(filepath.Join(leftover, "Files", "junk"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := sn.Prepare(ctx, "k", "")
	if err != nil {
		t.Fatal(err)
	}
	if m[0].Source != leftover {
		t.Fatalf("source %s, want the reused id's folder %s", m[0].Source, leftover)
	}
	if _, err := os.Stat(filepath.Join(leftover, "Files", "junk")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover content kept: %v", err)
	}
}

// TestMetadataRules checks the snapshot rules that hold whatever a layer folder holds:
// what may be committed and removed and when, name clashes, missing parents, labels and
// filters, Cleanup of folders no snapshot owns, and that removing everything leaves no folder.
func TestMetadataRules(t *testing.T) {
	ctx := context.Background()
	sn := newSnapshotter(t)
	if _, err := sn.Prepare(ctx, "base-active", ""); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, "base", "base-active"); err != nil {
		t.Fatal(err)
	}
	m, err := sn.Prepare(ctx, "ctr", "base")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn.View(ctx, "view", "base"); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		op   func() error
		kind func(error) bool
	}{
		{"Commit of a view", func() error { return sn.Commit(ctx, "x", "view") }, errdefs.IsFailedPrecondition},
		{"Commit of a committed snapshot", func() error { return sn.Commit(ctx, "x", "base") }, errdefs.IsFailedPrecondition},
		{"Commit of a missing snapshot", func() error { return sn.Commit(ctx, "x", "missing") }, errdefs.IsNotFound},
		{"Commit under a taken name", func() error {
			if _, err := sn.Prepare(ctx, "clash", "base"); err != nil {
				return err
			}
			return sn.Commit(ctx, "base", "clash")
		}, errdefs.IsAlreadyExists},
		{"Remove of a parent", func() error { return sn.Remove(ctx, "base") }, errdefs.IsFailedPrecondition},
		{"Remove of a missing snapshot", func() error { return sn.Remove(ctx, "missing") }, errdefs.IsNotFound},
		{"Prepare of a taken key", func() error { _, err := sn.Prepare(ctx, "ctr", "base"); return err }, errdefs.IsAlreadyExists},
		{"Prepare over a missing parent", func() error { _, err := sn.Prepare(ctx, "y", "missing"); return err }, errdefs.IsNotFound},
		{"Prepare over an active snapshot", func() error { _, err := sn.Prepare(ctx, "y", "ctr"); return err }, errdefs.IsInvalidArgument},
		{"Stat of a missing snapshot", func() error { _, err := sn.Stat(ctx, "missing"); return err }, errdefs.IsNotFound},
		{"Mounts of a committed snapshot", func() error { _, err := sn.Mounts(ctx, "base"); return err }, errdefs.IsFailedPrecondition},
	} {
		if err := tc.op(); !tc.kind(err) {
			t.Errorf("%s = %v", tc.name, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// A refused Prepare leaves nothing: no snapshot, no folder.
	if _, err := sn.Stat(ctx, "y"); !errdefs.IsNotFound(err) {
		t.Fatalf("refused Prepare left snapshot y: %v", err)
	}

	// While the storage filter is attached (a container runs), the snapshot can neither be
	// committed, removed, nor have a layer applied to it.
	t.Run("mounted", func(t *testing.T) {
		requireRoot(t)
		lm, err := ParseMounts(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := testLayers.Mount(ctx, lm.Source, lm.Parents); err != nil {
			t.Fatal(err)
		}
		defer testLayers.Unmount(ctx, lm.Source)
		cs := newStore(t)
		for name, op := range map[string]func() error{
			"Remove": func() error { return sn.Remove(ctx, "ctr") },
			"Commit": func() error { return sn.Commit(ctx, "committed", "ctr") },
			"Apply": func() error {
				_, err := NewDiffer(cs, testLayers).Apply(ctx, gzipBlob(t, cs, layerTar(t)), m)
				return err
			},
		} {
			if err := op(); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "in use by a container") {
				t.Errorf("%s of a mounted snapshot = %v, want a failed-precondition error", name, err)
			}
		}
		if err := testLayers.Unmount(ctx, lm.Source); err != nil {
			t.Fatal(err)
		}
		if _, err := sn.Stat(ctx, "ctr"); err != nil {
			t.Fatalf("a refused Remove changed the snapshot: %v", err)
		}
	})

	upd, err := sn.Update(ctx, snapshots.Info{Name: "ctr", Labels: map[string]string{"x": "y", "z": "w"}}, "labels.x")
	if err != nil || upd.Labels["x"] != "y" || upd.Labels["z"] != "" {
		t.Fatalf("Update of labels.x = %+v, %v; want only x set", upd, err)
	}
	var names []string
	if err := sn.Walk(ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}, "labels.x==y"); err != nil || !reflect.DeepEqual(names, []string{"ctr"}) {
		t.Fatalf("Walk with filter = %v, %v", names, err)
	}
	names = nil
	if err := sn.Walk(ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}, "kind==committed"); err != nil || !reflect.DeepEqual(names, []string{"base"}) {
		t.Fatalf("Walk of committed snapshots = %v, %v", names, err)
	}

	// Cleanup removes folders nobody owns (a Remove cut short, an old import) and keeps the
	// snapshots' own.
	root := filepath.Join(sn.Root(), "snapshots")
	orphan := filepath.Join(root, "rm-99")
	if err := os.MkdirAll(filepath.Join(orphan, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sn.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Cleanup left %s: %v", orphan, err)
	}
	if _, err := os.Stat(m[0].Source); err != nil {
		t.Fatalf("Cleanup removed a live snapshot: %v", err)
	}
	for _, k := range []string{"ctr", "view", "clash", "base"} {
		if err := sn.Remove(ctx, k); err != nil {
			t.Fatalf("Remove %s: %v", k, err)
		}
	}
	if ents, err := os.ReadDir(root); err != nil || len(ents) != 0 {
		t.Fatalf("snapshot folders left after removing all: %v, %v", ents, err)
	}
}
