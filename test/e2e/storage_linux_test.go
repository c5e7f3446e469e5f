package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/test/harness"
	"github.com/openhcs/runhcs/test/image"
)

// TestStorage checks the container storage of issue 4 end to end: a container sees its image's
// files at C:\, its writes land in its own scratch layer only (the image's layer folders stay
// as imported), and two containers of one image do not see each other's writes. What a
// container reads from several layers (whiteouts, replaced files) is TestImageLayers'.
func TestStorage(t *testing.T) {
	env := harness.Start(t, harness.Options{})
	ctx, cancel := context.WithTimeout(harness.Context(context.Background()), 5*time.Minute)
	defer cancel()

	img, wl, err := harness.TestImage("docker.io/runhcs/storage:latest")
	if err != nil {
		t.Fatal(err)
	}
	img.Layers[0] = image.BaseLayer(wl, image.BaseOptions{Extra: []image.Entry{
		{Path: "Files/data/shared.txt", Data: []byte("original")},
	}})
	if err := env.ImportTestImage(ctx, img); err != nil {
		t.Fatal(err)
	}

	start := func(id string) *harness.Task {
		t.Helper()
		tk, err := env.StartTask(ctx, t, harness.TaskRun{ID: id, Image: img.Name, Args: workload("sleep", "120")})
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	a, b := start("storage-a"), start("storage-b")
	n := 0
	// run execs args in tk and returns its stdout, failing t unless it exits with wantCode.
	run := func(t *testing.T, tk *harness.Task, wantCode uint32, args ...string) string {
		t.Helper()
		n++
		res, err := execIn(ctx, t, env, tk, fmt.Sprintf("s%d", n), workload(args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if res.code != wantCode {
			t.Fatalf("%s %v: exit %d, want %d; stdout %q, stderr %q", tk.Container.ID(), args, res.code, wantCode, res.stdout, res.stderr)
		}
		return res.stdout
	}

	t.Run("image files at C:", func(t *testing.T) {
		for _, tk := range []*harness.Task{a, b} {
			if got := run(t, tk, 0, "read", `C:\data\shared.txt`); got != "original" {
				t.Errorf("%s reads C:\\data\\shared.txt = %q, want the image's %q", tk.Container.ID(), got, "original")
			}
			if got := run(t, tk, 0, "read", `C:\Windows\System32\drivers\etc\hosts`); !strings.Contains(got, "localhost") {
				t.Errorf("%s reads the hosts file = %q", tk.Container.ID(), got)
			}
		}
	})

	t.Run("writes", func(t *testing.T) {
		run(t, a, 0, "write", `C:\data\shared.txt`, "from A")
		run(t, a, 0, "write", `C:\data\a-only.txt`, "A")
		run(t, b, 0, "write", `C:\b-only\note.txt`, "B")
		if got := run(t, a, 0, "read", `C:\data\shared.txt`); got != "from A" {
			t.Errorf("A reads its own write as %q", got)
		}
		if got := run(t, b, 0, "read", `C:\b-only\note.txt`); got != "B" {
			t.Errorf("B reads its own write as %q", got)
		}
	})

	t.Run("containers do not see each other's writes", func(t *testing.T) {
		if got := run(t, b, 0, "read", `C:\data\shared.txt`); got != "original" {
			t.Errorf("B reads C:\\data\\shared.txt = %q after A changed it; want %q", got, "original")
		}
		run(t, b, 1, "read", `C:\data\a-only.txt`)
		run(t, a, 1, "read", `C:\b-only\note.txt`)
	})

	t.Run("writes land in the scratch layer only", func(t *testing.T) {
		scratchA, parents := layerFolders(ctx, t, env, a)
		scratchB, _ := layerFolders(ctx, t, env, b)
		filesA := scratchFiles(t, scratchA)
		if filesA["shared.txt"] != "from A" || filesA["a-only.txt"] != "A" {
			t.Errorf("A's scratch layer %s holds %v; want shared.txt=%q and a-only.txt=%q", scratchA, filesA, "from A", "A")
		}
		if _, ok := filesA["note.txt"]; ok {
			t.Errorf("B's write is in A's scratch layer %s", scratchA)
		}
		filesB := scratchFiles(t, scratchB)
		if filesB["note.txt"] != "B" {
			t.Errorf("B's scratch layer %s holds %v; want note.txt=%q", scratchB, filesB, "B")
		}
		if _, ok := filesB["a-only.txt"]; ok {
			t.Errorf("A's a-only.txt is in B's scratch layer %s", scratchB)
		}
		if len(parents) == 0 {
			t.Fatal("no parent layers in the snapshot's mount")
		}
		for _, p := range parents {
			err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				switch d.Name() {
				case "a-only.txt", "note.txt", "b-only":
					t.Errorf("a container's write reached the image layer: %s", path)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		base := parents[len(parents)-1]
		if b, err := os.ReadFile(filepath.Join(base, "Files", "data", "shared.txt")); err != nil || string(b) != "original" {
			t.Errorf("image layer's Files/data/shared.txt = %q, %v after A wrote it; want %q", b, err, "original")
		}
	})

	t.Run("a new container starts from the image", func(t *testing.T) {
		killAndWait(ctx, t, a)
		res, err := env.CtrRun(ctx, "storage-c", img.Name, nil, workload("read", `C:\data\shared.txt`)...)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || res.Stdout != "original" {
			t.Fatalf("new container: exit %d, stdout %q, stderr %q; want %q", res.ExitCode, res.Stdout, res.Stderr, "original")
		}
	})
	killAndWait(ctx, t, b)
}

// layerFolders returns a running container's scratch layer folder and its parents (nearest
// first), from the windows-layer mount of its snapshot.
func layerFolders(ctx context.Context, t *testing.T, env *harness.Env, tk *harness.Task) (scratch string, parents []string) {
	t.Helper()
	mounts, err := env.SnapshotMounts(ctx, t, tk.Container)
	if err != nil || len(mounts) != 1 || mounts[0].Type != "windows-layer" {
		t.Fatalf("snapshot mounts of %s: %+v, %v; want one windows-layer mount", tk.Container.ID(), mounts, err)
	}
	for _, o := range mounts[0].Options {
		if v, ok := strings.CutPrefix(o, "parentLayerPaths="); ok {
			if err := json.Unmarshal([]byte(v), &parents); err != nil {
				t.Fatalf("mount option %q: %v", o, err)
			}
		}
	}
	return mounts[0].Source, parents
}

// scratchFiles returns the regular files stored in a scratch layer folder, by base name, with
// their content: what the layer itself holds, not the merged view mounted inside it.
func scratchFiles(t *testing.T, scratch string) map[string]string {
	t.Helper()
	skip := map[string]bool{}
	for _, m := range harness.MountsUnder(scratch) {
		if m != scratch {
			skip[m] = true
		}
	}
	if len(skip) == 0 {
		t.Fatalf("nothing is mounted inside the scratch layer %s of a running container", scratch)
	}
	files := map[string]string{}
	err := filepath.WalkDir(scratch, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skip[path] {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if b, err := os.ReadFile(path); err == nil && len(b) < 1024 {
				files[d.Name()] = string(b)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
