package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Microsoft/go-winio"
	contentapi "github.com/containerd/containerd/api/services/content/v1"
	diffapi "github.com/containerd/containerd/api/services/diff/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/diff"
	diffproxy "github.com/containerd/containerd/v2/core/diff/proxy"
	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/containerd/v2/core/snapshots"
	snproxy "github.com/containerd/containerd/v2/core/snapshots/proxy"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	"github.com/containerd/containerd/v2/pkg/namespaces"
	"github.com/containerd/containerd/v2/plugins/content/local"
	"github.com/containerd/containerd/v2/plugins/services/content/contentserver"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/openhcs/runhcs/internal/snapshot"
	"github.com/openhcs/runhcs/internal/wclayer"
	"github.com/openhcs/runhcs/internal/wintest"
	"github.com/openhcs/runhcs/test/image"
)

// imageLayers writes img as the OCI image tarball `ctr image import` reads and returns its
// layers' descriptors and blobs, as containerd's import puts them in its content store.
func imageLayers(t *testing.T, img *image.Image) ([]ocispec.Descriptor, map[string][]byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := img.WriteOCI(&buf); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name], _ = io.ReadAll(tr)
	}
	blob := func(d ocispec.Descriptor) []byte {
		b, ok := files["blobs/sha256/"+d.Digest.Encoded()]
		if !ok {
			t.Fatalf("blob %s missing from the image tarball", d.Digest)
		}
		return b
	}
	var index ocispec.Index
	var m ocispec.Manifest
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	if err := json.Unmarshal(blob(index.Manifests[0]), &m); err != nil {
		t.Fatal(err)
	}
	blobs := map[string][]byte{}
	for _, d := range m.Layers {
		blobs[d.Digest.String()] = blob(d)
	}
	return m.Layers, blobs
}

// entriesOf reads a layer blob's entries: name -> type, link and content, and for entries under
// Files\ their Windows attributes and security descriptor (what travels through the emulator's
// legacy folders; times and the records of Files, Hives and the hives do not under Wine: see
// internal/wclayer's TestChildLayerThroughHcsshim).
func entriesOf(t *testing.T, b []byte) map[string]string {
	t.Helper()
	rc, err := compression.DecompressStream(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		name := strings.TrimSuffix(h.Name, "/")
		v := fmt.Sprintf("type %c link %q content %q", h.Typeflag, h.Linkname, body)
		if strings.HasPrefix(name, "Files/") && !strings.Contains(name, "/.wh.") {
			v += " attrs " + h.PAXRecords["MSWINDOWS.fileattr"] + " sd " + h.PAXRecords["MSWINDOWS.rawsd"]
		}
		out[name] = v
	}
}

// TestServeThroughHcsshim runs this command's Windows build as containerd uses it, under Wine
// against hcsemu (make test-windows, as root): it serves on a named pipe, reads layer blobs
// from a content store served as containerd serves its own (another pipe), and is driven by
// containerd's snapshot and diff proxy clients, as containerd's proxy_plugins drive it. It
// unpacks a test image (test/image: a base layer with PAX metadata, an upper layer with a
// whiteout and a replaced file), mounts a container's chain (as the shim does, with
// ActivateLayer/PrepareLayer through the stand-in vmcompute.dll), and compares: the container's
// diff holds its write, and the upper layer's export is the layer it was unpacked from.
func TestServeThroughHcsshim(t *testing.T) {
	if os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HCSEMU_TCP_ADDRESS is not set: run through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows starts hcsemu and sets HCSEMU_TCP_ADDRESS when run as root")
	}
	ctx := namespaces.WithNamespace(context.Background(), "default")
	dir := t.TempDir()
	suffix := fmt.Sprint(time.Now().UnixNano())
	snapPipe, contentPipe := `\\.\pipe\runhcs-test-wcow-`+suffix, `\\.\pipe\runhcs-test-content-`+suffix

	// containerd's content store, served as containerd serves it.
	cs, err := local.NewStore(filepath.Join(dir, "content"))
	if err != nil {
		t.Fatal(err)
	}
	cl := wintest.ListenPipe(t, contentPipe)
	csrv := grpc.NewServer()
	contentapi.RegisterContentServer(csrv, contentserver.New(cs))
	go csrv.Serve(cl)
	t.Cleanup(csrv.Stop)

	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(sctx, snapPipe, filepath.Join(dir, "root"), contentPipe) }()
	dial := func(ctx context.Context, addr string) (net.Conn, error) { return winio.DialPipeContext(ctx, addr) }
	// serve runs in its own goroutine: wait until its pipe answers.
	for deadline := time.Now().Add(30 * time.Second); ; {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := dial(dctx, snapPipe)
		cancel()
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-served:
			t.Fatalf("serve returned before serving: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the snapshotter does not serve on %s: %v", snapPipe, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	conn, err := grpc.NewClient("passthrough:///"+snapPipe, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
	if err != nil {
		t.Fatal(err)
	}
	sn := snproxy.NewSnapshotter(snapshotsapi.NewSnapshotsClient(conn), "wcow")
	differ := diffproxy.NewDiffApplier(diffapi.NewDiffClient(conn)).(interface {
		diff.Applier
		diff.Comparer
	})
	var keys []string
	t.Cleanup(func() {
		// Snapshots go through DestroyLayer: Wine cannot remove the emulator's whiteouts.
		for i := len(keys) - 1; i >= 0; i-- {
			if err := sn.Remove(ctx, keys[i]); err != nil {
				t.Errorf("Remove(%s): %v", keys[i], err)
			}
		}
		if err := sn.(snapshots.Cleaner).Cleanup(ctx); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
		conn.Close()
		stop()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	workload := []byte("MZ stand-in workload")
	img := image.Default(workload)
	img.Layers[0] = image.BaseLayer(workload, image.BaseOptions{Extra: []image.Entry{
		{Path: "Files/data/kept.txt", Data: []byte("kept")},
		{Path: "Files/data/gone.txt", Data: []byte("gone")},
		{Path: "Files/data/replaced.txt", Data: []byte("old")},
	}})
	img.Layers = append(img.Layers, image.Layer{Comment: "upper layer with a whiteout", Entries: []image.Entry{
		{Path: "Files/data", Dir: true},
		{Path: "Files/data/gone.txt", Whiteout: true},
		{Path: "Files/data/new.txt", Data: []byte("new")},
		{Path: "Files/data/replaced.txt", Data: []byte("new version")},
		// Windows layers carry their registry deltas; hcsshim's layer reader needs this one.
		{Path: "Hives/System_Delta", Data: []byte("regf delta")},
	}})
	descs, blobs := imageLayers(t, img)
	parent := ""
	for i, d := range descs {
		if err := content.WriteBlob(ctx, cs, d.Digest.String(), bytes.NewReader(blobs[d.Digest.String()]), d); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("layer%d", i)
		m, err := sn.Prepare(ctx, snapshots.UnpackKeyPrefix+"-"+key, parent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := differ.Apply(ctx, d, m); err != nil {
			t.Fatalf("Apply of layer %d: %v", i, err)
		}
		if err := sn.Commit(ctx, key, snapshots.UnpackKeyPrefix+"-"+key); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
		parent = key
	}

	m, err := sn.Prepare(ctx, "ctr", parent)
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "ctr")
	lm, err := snapshot.ParseMounts(m)
	if err != nil {
		t.Fatal(err)
	}
	layers := wclayer.New()
	vol, err := layers.Mount(ctx, lm.Source, lm.Parents)
	if err != nil {
		t.Fatalf("mounting the container's chain: %v", err)
	}
	for name, want := range map[string]string{
		`workload\workload.exe`: string(workload), `data\kept.txt`: "kept", `data\new.txt`: "new",
		`data\replaced.txt`: "new version", `License.txt`: "runhcs test image: not Windows, only its layer format.\r\n",
	} {
		if b, err := os.ReadFile(vol + name); err != nil || string(b) != want {
			t.Errorf("the container reads %s as %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(vol + `data\gone.txt`); !os.IsNotExist(err) {
		t.Errorf("the container sees the whited-out data\\gone.txt: %v", err)
	}
	if err := os.WriteFile(vol+`data\written.txt`, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := layers.Unmount(ctx, lm.Source); err != nil {
		t.Fatal(err)
	}

	compare := func(lowerKey, lowerOf string, upper []mount.Mount) map[string]string {
		t.Helper()
		lower, err := sn.View(ctx, lowerKey, lowerOf)
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, lowerKey)
		desc, err := differ.Compare(ctx, lower, upper)
		if err != nil {
			t.Fatalf("Compare over %s: %v", lowerOf, err)
		}
		ra, err := cs.ReaderAt(ctx, desc)
		if err != nil {
			t.Fatal(err)
		}
		defer ra.Close()
		b, _ := io.ReadAll(content.NewReader(ra))
		return entriesOf(t, b)
	}
	if got := compare("upper-view", parent, m); !strings.Contains(got["Files/data/written.txt"], `content "hello"`) {
		t.Errorf("the container's diff holds %v; want Files/data/written.txt with its content", got)
	}

	top, err := sn.View(ctx, "top-view", parent)
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "top-view")
	want, got := entriesOf(t, blobs[descs[1].Digest.String()]), compare("base-view", "layer0", top)
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing from the export", name)
		} else if g != w {
			t.Errorf("%s: exported as %s, want %s", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: exported, but not in the layer unpacked", name)
		}
	}
}
