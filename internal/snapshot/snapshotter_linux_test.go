package snapshot

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/errdefs"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestLifecycle unpacks two layers through the differ, runs a "container" on them, and
// checks Remove/Commit refusals, Compare, Usage, Walk, Update and Cleanup. It looks at what
// the container sees through the overlayfs volume and at the emulator's scratch folders, so it
// runs under Linux only; TestMetadataRules checks the rules that hold on Windows too.
func TestLifecycle(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	sn := newSnapshotter(t)
	cs := newStore(t)
	d := NewDiffer(cs, testLayers)

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
	vol, err := testLayers.Mount(ctx, lm.Source, lm.Parents)
	if err != nil {
		t.Fatal(err)
	}
	defer testLayers.Unmount(ctx, lm.Source)
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
	vol2, err := testLayers.Mount(ctx, lm2.Source, lm2.Parents)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(vol2, "written.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ctr2 sees ctr1's write: %v", err)
	}
	if err := testLayers.Unmount(ctx, lm2.Source); err != nil {
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

	if err := testLayers.Unmount(ctx, lm.Source); err != nil {
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
