package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// readTar returns every regular file of a tar by name, and the headers in order.
func readTar(t *testing.T, r io.Reader) (map[string][]byte, []*tar.Header) {
	t.Helper()
	files := map[string][]byte{}
	var hdrs []*tar.Header
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, hdrs
		}
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}

func blob(t *testing.T, files map[string][]byte, d ocispec.Descriptor) []byte {
	t.Helper()
	b, ok := files["blobs/sha256/"+d.Digest.Encoded()]
	if !ok {
		t.Fatalf("blob %s missing", d.Digest)
	}
	if digest.FromBytes(b) != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s does not match its descriptor (size %d, want %d)", d.Digest, len(b), d.Size)
	}
	return b
}

func layerTar(t *testing.T, files map[string][]byte, d ocispec.Descriptor) []byte {
	t.Helper()
	b := blob(t, files, d)
	switch d.MediaType {
	case ocispec.MediaTypeImageLayerGzip:
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	case ocispec.MediaTypeImageLayer:
		return b
	}
	t.Fatalf("unexpected layer media type %q", d.MediaType)
	return nil
}

func TestDefaultImage(t *testing.T) {
	img := Default([]byte("WORKLOAD"))
	img.Layers = append(img.Layers, Layer{
		Uncompressed: true,
		Entries: []Entry{
			{Path: "Files/workload/workload.exe", Whiteout: true},
			{Path: "Files/data/new.txt", Data: []byte("new")},
		},
	})
	var buf bytes.Buffer
	if err := img.WriteOCI(&buf); err != nil {
		t.Fatal(err)
	}
	files, _ := readTar(t, bytes.NewReader(buf.Bytes()))
	if got := string(files["oci-layout"]); !strings.Contains(got, `"imageLayoutVersion":"1.0.0"`) {
		t.Errorf("oci-layout = %s", got)
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(index.Manifests))
	}
	md := index.Manifests[0]
	if md.Annotations[AnnotationImageName] != DefaultName || md.Annotations[AnnotationRefName] != "latest" {
		t.Errorf("manifest annotations = %v", md.Annotations)
	}
	if md.Platform == nil || md.Platform.OS != "windows" || md.Platform.OSVersion != DefaultOSVersion || md.Platform.Architecture != "amd64" {
		t.Errorf("index platform = %+v", md.Platform)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(blob(t, files, md), &m); err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(blob(t, files, m.Config), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "windows" || cfg.OSVersion != DefaultOSVersion || cfg.Architecture != "amd64" {
		t.Errorf("config platform = %s %s %s", cfg.OS, cfg.OSVersion, cfg.Architecture)
	}
	wantCmd := []string{`C:\workload\workload.exe`, "echo", "hello from a windows container"}
	if strings.Join(cfg.Config.Cmd, "|") != strings.Join(wantCmd, "|") {
		t.Errorf("Cmd = %q, want %q", cfg.Config.Cmd, wantCmd)
	}
	if len(cfg.Config.Env) != 1 || cfg.Config.Env[0] != `PATH=C:\Windows\System32;C:\Windows;C:\Windows\System32\WindowsPowerShell\v1.0;C:\workload` {
		t.Errorf("Env = %q", cfg.Config.Env)
	}
	if len(m.Layers) != 2 || len(cfg.RootFS.DiffIDs) != 2 {
		t.Fatalf("%d layers, %d diff ids; want 2 and 2", len(m.Layers), len(cfg.RootFS.DiffIDs))
	}

	base := layerTar(t, files, m.Layers[0])
	if digest.FromBytes(base) != cfg.RootFS.DiffIDs[0] {
		t.Errorf("base diff id mismatch")
	}
	baseFiles, hdrs := readTar(t, bytes.NewReader(base))
	for _, want := range []string{"Files/workload/workload.exe", "Files/Windows/System32/workload.exe"} {
		if string(baseFiles[want]) != "WORKLOAD" {
			t.Errorf("%s = %q, want the workload", want, baseFiles[want])
		}
	}
	// The tools' stand-ins are hard links to the workload, each after its target.
	links := map[string]bool{}
	for _, p := range ToolPaths {
		links["Files/"+p] = true
	}
	seen := map[string]bool{}
	for _, h := range hdrs {
		if links[h.Name] {
			if h.Typeflag != tar.TypeLink || h.Linkname != "Files/Windows/System32/workload.exe" || !seen[h.Linkname] {
				t.Errorf("%s: type %c link %q (target seen before: %v); want a hard link to the workload after it", h.Name, h.Typeflag, h.Linkname, seen[h.Linkname])
			}
			delete(links, h.Name)
		}
		seen[h.Name] = true
		if h.Format != tar.FormatPAX {
			t.Errorf("%s: format %v, want PAX", h.Name, h.Format)
		}
		attr := h.PAXRecords["MSWINDOWS.fileattr"]
		if h.Typeflag == tar.TypeDir && attr != "16" && attr != "18" {
			t.Errorf("%s: dir fileattr %q", h.Name, attr)
		}
		if (h.Typeflag == tar.TypeReg || h.Typeflag == tar.TypeLink) && attr != "32" {
			t.Errorf("%s: file fileattr %q, want 32", h.Name, attr)
		}
		if h.PAXRecords["MSWINDOWS.rawsd"] == "" || h.PAXRecords["LIBARCHIVE.creationtime"] == "" {
			t.Errorf("%s: missing Windows PAX records: %v", h.Name, h.PAXRecords)
		}
	}
	if len(links) != 0 {
		t.Errorf("tools missing from the base layer: %v", links)
	}
	for _, want := range []string{"Files/", "Hives/", "Hives/SYSTEM_Delta", "UtilityVM/Files/", "Files/workload/"} {
		if !seen[want] {
			t.Errorf("base layer lacks %s", want)
		}
	}

	for _, f := range []string{"Files/" + OSBuildFile, "UtilityVM/Files/" + OSBuildFile} {
		if got := strings.TrimSpace(string(baseFiles[f])); got != DefaultOSVersion {
			t.Errorf("%s = %q, want the image's build %s", f, got, DefaultOSVersion)
		}
	}

	upper := layerTar(t, files, m.Layers[1])
	if m.Layers[1].MediaType != ocispec.MediaTypeImageLayer {
		t.Errorf("uncompressed layer media type = %s", m.Layers[1].MediaType)
	}
	upperFiles, _ := readTar(t, bytes.NewReader(upper))
	if _, ok := upperFiles["Files/workload/.wh.workload.exe"]; !ok {
		t.Errorf("whiteout missing from upper layer: %v", upperFiles)
	}
	if string(upperFiles["Files/data/new.txt"]) != "new" {
		t.Errorf("Files/data/new.txt = %q", upperFiles["Files/data/new.txt"])
	}
}

func TestReproducible(t *testing.T) {
	var a, b bytes.Buffer
	if err := Default([]byte("x")).WriteOCI(&a); err != nil {
		t.Fatal(err)
	}
	if err := Default([]byte("x")).WriteOCI(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("two writes of the same image differ")
	}
}

func TestBadEntries(t *testing.T) {
	tests := []struct {
		name  string
		entry Entry
		want  string
	}{
		{"outside roots", Entry{Path: "Windows/x"}, "starts with Files/"},
		{"backslash", Entry{Path: `Files\x`}, "forward slashes"},
		{"whiteout root", Entry{Path: "Files", Whiteout: true}, "layer root"},
		{"link to nothing", Entry{Path: "Files/a.exe", Link: "Files/b.exe"}, `hard link target "Files/b.exe" is not a file of this layer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := &Image{Name: "x:1", Layers: []Layer{{Entries: []Entry{tt.entry}}}}
			err := img.WriteOCI(io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

// TestSecurityDescriptor checks the fixed descriptor is self-relative and its offsets point
// inside it, so a parser of MSWINDOWS.rawsd accepts it.
func TestSecurityDescriptor(t *testing.T) {
	b, err := base64.StdEncoding.DecodeString(defaultSD)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 1 || b[2] != 0x04 || b[3] != 0x80 {
		t.Fatalf("header = % x, want revision 1 and control 0x8004", b[:4])
	}
	for i, name := range []string{"owner", "group", "sacl", "dacl"} {
		off := int(b[4+4*i]) | int(b[5+4*i])<<8
		if off >= len(b) {
			t.Errorf("%s offset %d beyond %d bytes", name, off, len(b))
		}
	}
}

func TestRefName(t *testing.T) {
	for in, want := range map[string]string{
		"docker.io/runhcs/test:latest": "latest",
		"localhost:5000/x":             "localhost:5000/x",
		"x:1":                          "1",
	} {
		if got := refName(in); got != want {
			t.Errorf("refName(%q) = %q, want %q", in, got, want)
		}
	}
}
