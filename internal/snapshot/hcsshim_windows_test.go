package snapshot

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/containerd/containerd/v2/core/content"
	"github.com/containerd/containerd/v2/core/snapshots"
	"github.com/containerd/containerd/v2/pkg/archive/compression"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/openhcs/runhcs/internal/wclayer"
)

// rawSD is a self-relative security descriptor (O:BAG:SYD:(A;;FA;;;SY)), as MSWINDOWS.rawsd
// carries one.
var rawSD = base64.StdEncoding.EncodeToString([]byte{
	0x01, 0x00, 0x04, 0x80, 0x14, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x30, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x20, 0x00, 0x00, 0x00,
	0x20, 0x02, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
	0x02, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0xff, 0x01, 0x1f, 0x00,
	0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
})

// went is an entry of winLayer: a folder (body "/"), a file, a hard link (link set), a
// whiteout (a .wh. name), with Windows attributes and, when sd, a security descriptor.
type went struct {
	name, body, link string
	attrs            string
	sd               bool
}

// winLayer writes a layer tar in the shape go-winio's backuptar writes them.
func winLayer(t *testing.T, ents ...went) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range ents {
		h := &tar.Header{Format: tar.FormatPAX, Name: e.name, Typeflag: tar.TypeReg, Mode: 0o100000, Size: int64(len(e.body)),
			ModTime: epoch, AccessTime: epoch, ChangeTime: epoch}
		if !strings.Contains(e.name, "/.wh.") {
			h.PAXRecords = map[string]string{"MSWINDOWS.fileattr": e.attrs, "LIBARCHIVE.creationtime": "1646370367"}
			if e.sd {
				h.PAXRecords["MSWINDOWS.rawsd"] = rawSD
			}
		}
		switch {
		case e.body == "/":
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o040000, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeLink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			io.WriteString(tw, e.body)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarEntries reads a tar's entries: name -> type, link, content and the Windows records.
func tarEntries(t *testing.T, r io.Reader) map[string]string {
	t.Helper()
	out := map[string]string{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		v := string(h.Typeflag) + " link=" + h.Linkname + " body=" + string(b)
		// Windows records of entries under Files\ travel in the backup streams; those of Files,
		// Hives and the hives are what Wine shows of the folders hcsshim's reader walks.
		if strings.HasPrefix(h.Name, "Files/") && h.Typeflag != tar.TypeLink && !strings.Contains(h.Name, "/.wh.") {
			v += " attrs=" + h.PAXRecords["MSWINDOWS.fileattr"] + " sd=" + h.PAXRecords["MSWINDOWS.rawsd"]
		}
		out[strings.TrimSuffix(h.Name, "/")] = v
	}
}

func blobTar(t *testing.T, cs content.Store, desc ocispec.Descriptor) map[string]string {
	t.Helper()
	ra, err := cs.ReaderAt(context.Background(), desc)
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Close()
	rc, err := compression.DecompressStream(content.NewReader(ra))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	return tarEntries(t, rc)
}

// TestSnapshotterThroughHcsshim runs this package's Windows build over hcsshim's real layer
// functions (ociwclayer, vmcompute.dll's stand-in, hcsemu's storage filter), as the Windows
// snapshotter and differ do on a Windows host: two layers unpacked through the differ (PAX
// metadata, a hard link, a whiteout), a container's chain mounted and written to, Compare of
// the container, and Compare of the upper layer, which must give back the tar it was unpacked
// from (entries, contents, link, whiteout, and under Files\ attributes and security
// descriptors). Times are not compared under Wine (see internal/wclayer's
// TestChildLayerThroughHcsshim).
func TestSnapshotterThroughHcsshim(t *testing.T) {
	if os.Getenv("HCSEMU_TCP_ADDRESS") == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("HCSEMU_TCP_ADDRESS is not set: run through make test-windows as root")
		}
		t.Skip("no emulator: make test-windows starts hcsemu and sets HCSEMU_TCP_ADDRESS when run as root")
	}
	ctx := context.Background()
	layers := wclayer.New()
	sn, err := NewSnapshotter(t.TempDir(), layers)
	if err != nil {
		t.Fatal(err)
	}
	cs := newStore(t)
	d := NewDiffer(cs, layers)
	var keys []string
	t.Cleanup(func() {
		// Snapshots go through DestroyLayer (Wine cannot remove the emulator's whiteouts).
		for i := len(keys) - 1; i >= 0; i-- {
			if err := sn.Remove(ctx, keys[i]); err != nil {
				t.Errorf("Remove(%s): %v", keys[i], err)
			}
		}
		if err := sn.Cleanup(ctx); err != nil {
			t.Errorf("Cleanup: %v", err)
		}
		sn.Close()
	})
	unpack := func(key, parent string, tarb []byte) {
		t.Helper()
		m, err := sn.Prepare(ctx, snapshots.UnpackKeyPrefix+"-"+key, parent)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Apply(ctx, gzipBlob(t, cs, tarb), m); err != nil {
			t.Fatalf("Apply %s: %v", key, err)
		}
		if err := sn.Commit(ctx, key, snapshots.UnpackKeyPrefix+"-"+key); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, key)
	}
	unpack("base", "", winLayer(t,
		went{name: "Files", body: "/", attrs: "16"},
		went{name: "Files/data", body: "/", attrs: "16", sd: true},
		went{name: "Files/data/kept.txt", body: "kept", attrs: "32", sd: true},
		went{name: "Files/data/gone.txt", body: "gone", attrs: "32"},
		went{name: "Files/workload", body: "/", attrs: "16"},
		went{name: "Files/workload/workload.exe", body: "MZ workload", attrs: "32"},
		went{name: "Files/workload/copy.exe", link: "Files/workload/workload.exe", attrs: "32"},
		went{name: "Hives", body: "/", attrs: "16"},
		went{name: "Hives/System_Delta", body: "regf", attrs: "32"},
	))
	top := winLayer(t,
		went{name: "Files", body: "/", attrs: "16"},
		went{name: "Files/data", body: "/", attrs: "16", sd: true},
		went{name: "Files/data/.wh.gone.txt"},
		went{name: "Files/data/new.txt", body: "new", attrs: "33", sd: true},
		went{name: "Files/data/new.txt.link", link: "Files/data/new.txt", attrs: "33"},
		went{name: "Hives", body: "/", attrs: "16"},
		went{name: "Hives/System_Delta", body: "regf delta", attrs: "32"},
	)
	unpack("top", "base", top)

	m, err := sn.Prepare(ctx, "ctr", "top")
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "ctr")
	lm, err := ParseMounts(m)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := layers.Mount(ctx, lm.Source, lm.Parents)
	if err != nil {
		t.Fatalf("mounting the container's chain: %v", err)
	}
	for name, want := range map[string]string{
		`data\kept.txt`: "kept", `data\new.txt`: "new", `data\new.txt.link`: "new",
		`workload\workload.exe`: "MZ workload", `workload\copy.exe`: "MZ workload",
	} {
		if b, err := os.ReadFile(vol + name); err != nil || string(b) != want {
			t.Errorf("the container reads %s as %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(vol + `data\gone.txt`); !os.IsNotExist(err) {
		t.Errorf("the container sees the whited-out data\\gone.txt: %v", err)
	}
	if err := os.WriteFile(vol+"written.txt", []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := layers.Unmount(ctx, lm.Source); err != nil {
		t.Fatal(err)
	}

	// The container's changes, as `ctr snapshot diff` or a commit asks for them.
	lower, err := sn.View(ctx, "top-view", "top")
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "top-view")
	desc, err := d.Compare(ctx, lower, m)
	if err != nil {
		t.Fatalf("Compare of the container: %v", err)
	}
	if got := blobTar(t, cs, desc); !strings.HasPrefix(got["Files/written.txt"], "0 link= body=hello") {
		t.Errorf("the container's diff holds %v; want Files/written.txt with its content", got)
	}

	// The upper layer, exported back, is the tar it was unpacked from.
	baseView, err := sn.View(ctx, "base-view", "base")
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "base-view")
	desc, err = d.Compare(ctx, baseView, lower)
	if err != nil {
		t.Fatalf("Compare of the upper layer: %v", err)
	}
	want, got := tarEntries(t, bytes.NewReader(top)), blobTar(t, cs, desc)
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: missing from the export", name)
		} else if g != w {
			t.Errorf("%s: exported as %q, want %q", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: exported, but not in the layer unpacked", name)
		}
	}
}
