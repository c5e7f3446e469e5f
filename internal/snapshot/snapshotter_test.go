package snapshot

import (
	"context"
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

	"github.com/openhcs/runhcs/internal/wclayer"
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
	tests := []struct {
		name string
		call func() ([]mount.Mount, error)
		want []string
	}{
		{"prepare over two", func() ([]mount.Mount, error) { return sn.Prepare(ctx, "c", "mid") },
			[]string{"rw", `parentLayerPaths=["` + dir("2") + `","` + dir("1") + `"]`}},
		{"view over two", func() ([]mount.Mount, error) { return sn.View(ctx, "v", "mid") },
			[]string{"ro", `parentLayerPaths=["` + dir("2") + `","` + dir("1") + `"]`}},
		{"mounts again", func() ([]mount.Mount, error) { return sn.Mounts(ctx, "c") },
			[]string{"rw", `parentLayerPaths=["` + dir("2") + `","` + dir("1") + `"]`}},
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
			if err != nil || len(lm.Parents) != 2 {
				t.Fatalf("ParseMounts = %+v, %v", lm, err)
			}
		})
	}
	// encoding/json escapes <, > and & in strings: containerd's mounts do too, so a path with
	// them must come out escaped the same way.
	if got := layerMounts("s", []string{`C:\a&b<c>`}, false)[0].Options[1]; got != `parentLayerPaths=["C:\\a\u0026b\u003cc\u003e"]` {
		t.Fatalf("escaping: %s", got)
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
	// With a UtilityVM folder in the base layer, the label makes vm/ a scratch layer.
	id, _, _, _ := statID(t, sn, "base")
	if err := os.MkdirAll(filepath.Join(sn.Root(), "snapshots", id, "UtilityVM", "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := sn.Prepare(ctx, "uvm", "base", snapshots.WithLabels(map[string]string{LabelUVMScratch: "true"}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(m[0].Source, UVMScratchDir, "Files")); err != nil {
		t.Fatalf("no utility VM scratch: %v", err)
	}
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

// TestLifecycle unpacks two layers through the differ, runs a "container" on them, and
// checks Remove/Commit refusals, Compare, Usage, Walk, Update and Cleanup.
func TestLifecycle(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	sn := newSnapshotter(t)
	cs := newStore(t)
	d := NewDiffer(cs)

	unpack := func(key, parent string, tarb []byte) {
		t.Helper()
		m, err := sn.Prepare(ctx, snapshots.UnpackKeyPrefix+"-"+key, parent)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := d.Apply(ctx, gzipBlob(t, cs, tarb), m)
		if err != nil {
			t.Fatal(err)
		}
		if applied.Size != int64(len(tarb)) || applied.MediaType != ocispec.MediaTypeImageLayer {
			t.Fatalf("Apply = %+v, want the uncompressed tar (%d bytes)", applied, len(tarb))
		}
		if err := sn.Commit(ctx, key, snapshots.UnpackKeyPrefix+"-"+key); err != nil {
			t.Fatal(err)
		}
	}
	unpack("base", "", layerTar(t, file{"Files", "/"}, file{"Files/workload", "/"}, file{"Files/workload/workload.exe", "exe"}, file{"Files/old.txt", "old"}))
	unpack("top", "base", layerTar(t, file{"Files/.wh.old.txt", ""}, file{"Files/top.txt", "top"}))

	m, err := sn.Prepare(ctx, "ctr1", "top")
	if err != nil {
		t.Fatal(err)
	}
	lm, _ := ParseMounts(m)
	vol, err := wclayer.Mount(ctx, lm.Source, lm.Parents)
	if err != nil {
		t.Fatal(err)
	}
	defer wclayer.Unmount(ctx, lm.Source)
	for _, f := range []string{"workload/workload.exe", "top.txt"} {
		if _, err := os.Stat(filepath.Join(vol, f)); err != nil {
			t.Fatalf("container does not see %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(vol, "old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("whited-out old.txt visible: %v", err)
	}
	if err := os.WriteFile(filepath.Join(vol, "written.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A second container of the same image does not see the first one's writes.
	m2, err := sn.Prepare(ctx, "ctr2", "top")
	if err != nil {
		t.Fatal(err)
	}
	lm2, _ := ParseMounts(m2)
	vol2, err := wclayer.Mount(ctx, lm2.Source, lm2.Parents)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vol2, "written.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ctr2 sees ctr1's write: %v", err)
	}
	if err := wclayer.Unmount(ctx, lm2.Source); err != nil {
		t.Fatal(err)
	}

	for name, op := range map[string]func() error{
		"Remove": func() error { return sn.Remove(ctx, "ctr1") },
		"Commit": func() error { return sn.Commit(ctx, "committed", "ctr1") },
		"Apply": func() error {
			_, err := d.Apply(ctx, gzipBlob(t, cs, layerTar(t)), m)
			return err
		},
	} {
		if err := op(); !errdefs.IsFailedPrecondition(err) || !strings.Contains(err.Error(), "in use by a container") {
			t.Errorf("%s of a mounted snapshot = %v, want a failed-precondition error", name, err)
		}
	}

	usage, err := sn.Usage(ctx, "ctr1")
	// Files/ and written.txt: the mounted volume inside the folder is not counted.
	if err != nil || usage.Size == 0 || usage.Inodes != 2 {
		t.Fatalf("Usage = %+v, %v", usage, err)
	}

	// Compare of the container against its image, as `ctr snapshot diff` or a commit does.
	lower, err := sn.View(ctx, "top-view", "top")
	if err != nil {
		t.Fatal(err)
	}
	desc, err := d.Compare(ctx, lower, m)
	if err != nil {
		t.Fatal(err)
	}
	if desc.MediaType != ocispec.MediaTypeImageLayerGzip {
		t.Fatalf("Compare media type %s", desc.MediaType)
	}
	ents := blobEntries(t, cs, desc)
	if ents["Files/written.txt"] != "hello" || len(ents) > 2 { // Files/ itself and the new file
		t.Fatalf("diff entries = %v", ents)
	}
	info, err := cs.Info(ctx, desc.Digest)
	if err != nil || info.Labels[LabelUncompressed] == "" {
		t.Fatalf("diff blob labels = %v, %v", info.Labels, err)
	}
	if _, err := d.Compare(ctx, m2, m); !errdefs.IsInvalidArgument(err) {
		t.Fatalf("Compare against a non-parent = %v", err)
	}

	if err := wclayer.Unmount(ctx, lm.Source); err != nil {
		t.Fatal(err)
	}
	if err := sn.Commit(ctx, "committed", "ctr1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(lm.Source, "work")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("commit left the overlay work folder: %v", err)
	}
	// A committed snapshot is compared through a view of it, as rootfs.CreateDiff does.
	topView, err := sn.View(ctx, "committed-view", "committed")
	if err != nil {
		t.Fatal(err)
	}
	desc2, err := d.Compare(ctx, lower, topView)
	if err != nil {
		t.Fatal(err)
	}
	if desc2.Digest != desc.Digest {
		t.Fatalf("diff of the committed layer %s differs from the diff of the active one %s", desc2.Digest, desc.Digest)
	}
	if err := sn.Remove(ctx, "committed-view"); err != nil {
		t.Fatal(err)
	}
	if err := sn.Remove(ctx, "top"); !errdefs.IsFailedPrecondition(err) {
		t.Fatalf("Remove of a parent = %v, want failed precondition", err)
	}

	upd, err := sn.Update(ctx, snapshots.Info{Name: "committed", Labels: map[string]string{"x": "y"}}, "labels.x")
	if err != nil || upd.Labels["x"] != "y" {
		t.Fatalf("Update = %+v, %v", upd, err)
	}
	var names []string
	if err := sn.Walk(ctx, func(_ context.Context, i snapshots.Info) error {
		names = append(names, i.Name)
		return nil
	}, "labels.x==y"); err != nil || !reflect.DeepEqual(names, []string{"committed"}) {
		t.Fatalf("Walk with filter = %v, %v", names, err)
	}

	// Cleanup removes folders nobody owns and keeps the others.
	orphan := filepath.Join(sn.Root(), "snapshots", "rm-99")
	if err := os.MkdirAll(filepath.Join(orphan, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sn.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Cleanup left %s", orphan)
	}
	if _, err := os.Stat(lm.Source); err != nil {
		t.Fatalf("Cleanup removed a live snapshot: %v", err)
	}
	for _, k := range []string{"committed", "ctr2", "top-view", "top", "base"} {
		if err := sn.Remove(ctx, k); err != nil {
			t.Fatalf("Remove %s: %v", k, err)
		}
	}
	ents2, _ := os.ReadDir(filepath.Join(sn.Root(), "snapshots"))
	if len(ents2) != 0 {
		t.Fatalf("snapshot folders left after removing all: %v", ents2)
	}
}

func TestDifferNotImplemented(t *testing.T) {
	ctx := context.Background()
	d := NewDiffer(newStore(t))
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
	if _, err := NewDiffer(nil).Apply(ctx, ocispec.Descriptor{MediaType: ocispec.MediaTypeImageLayer}, wl); !errdefs.IsUnavailable(err) {
		t.Fatalf("Apply without a content store = %v", err)
	}
}

// TestParallel prepares over one parent and applies to different snapshots at once.
func TestParallel(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	sn := newSnapshotter(t)
	cs := newStore(t)
	d := NewDiffer(cs)
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
