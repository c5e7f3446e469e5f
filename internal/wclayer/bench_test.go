package wclayer

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeMixedTar writes an OCI Windows layer tar of about totalMB MiB in the shape of a real
// image layer: mostly small files, some medium, a few large ones, in nested folders, each with
// the Windows PAX records. Deterministic for a given size.
func writeMixedTar(tb testing.TB, w io.Writer, totalMB int) {
	tb.Helper()
	rng := rand.New(rand.NewSource(int64(totalMB)))
	tw := tar.NewWriter(w)
	hdr := func(name string, typ byte, size int64) *tar.Header {
		return &tar.Header{
			Format: tar.FormatPAX, Name: name, Typeflag: typ, Size: size, Mode: modeReg,
			ModTime: fixtureEpoch, AccessTime: fixtureEpoch, ChangeTime: fixtureEpoch,
			PAXRecords: map[string]string{
				PAXFileAttributes: "32", PAXCreationTime: formatPAXTime(fixtureEpoch),
				PAXRawSD: "AQAEgBQAAAAkAAAAAAAAADAAAAABAgAAAAAABSAAAAAgAgAAAQEAAAAAAAUSAAAAAgAcAAEAAAAAABQA/wEfAAEBAAAAAAAFEgAAAA==",
			},
		}
	}
	chunk := make([]byte, 1<<20)
	rng.Read(chunk)
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(tw.WriteHeader(hdr("Files", tar.TypeDir, 0)))
	total, limit := int64(0), int64(totalMB)<<20
	for d := 0; total < limit; d++ {
		dir := fmt.Sprintf("Files/dir%03d/sub%02d", d/10, d%10)
		if d%10 == 0 {
			must(tw.WriteHeader(hdr(fmt.Sprintf("Files/dir%03d", d/10), tar.TypeDir, 0)))
		}
		must(tw.WriteHeader(hdr(dir, tar.TypeDir, 0)))
		for f := 0; f < 40 && total < limit; f++ {
			var size int64
			switch r := rng.Intn(100); {
			case r < 70:
				size = int64(rng.Intn(16 << 10)) // small: under 16 KiB
			case r < 97:
				size = int64(64<<10 + rng.Intn(960<<10)) // medium: 64 KiB - 1 MiB
			default:
				size = int64(4<<20 + rng.Intn(12<<20)) // large: 4 - 16 MiB
			}
			must(tw.WriteHeader(hdr(fmt.Sprintf("%s/file%02d.dll", dir, f), tar.TypeReg, size)))
			for left := size; left > 0; {
				n := min(left, int64(len(chunk)))
				off := rng.Intn(len(chunk) - int(n) + 1)
				_, err := tw.Write(chunk[off : off+int(n)])
				must(err)
				left -= n
			}
			total += size
		}
	}
	must(tw.Close())
}

func benchImport(b *testing.B, open func() io.Reader, size int64) {
	requireRoot(b)
	dir := b.TempDir()
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		layer := filepath.Join(dir, strconv.Itoa(i))
		if _, err := New().ImportLayer(context.Background(), open(), layer, nil, ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := os.RemoveAll(layer); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkImport measures import throughput (MB/s of tar) on a 64 MiB mixed layer in memory.
func BenchmarkImport(b *testing.B) {
	var buf bytes.Buffer
	writeMixedTar(b, &buf, 64)
	benchImport(b, func() io.Reader { return bytes.NewReader(buf.Bytes()) }, int64(buf.Len()))
}

// BenchmarkImportFile measures import throughput of the tar named by $WCLAYER_BENCH_TAR, the
// same file hack/bench-import.sh extracts with GNU tar.
func BenchmarkImportFile(b *testing.B) {
	p := os.Getenv("WCLAYER_BENCH_TAR")
	if p == "" {
		b.Skip("WCLAYER_BENCH_TAR not set")
	}
	fi, err := os.Stat(p)
	if err != nil {
		b.Fatal(err)
	}
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	benchImport(b, func() io.Reader {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		files = append(files, f)
		return f
	}, fi.Size())
}

// BenchmarkExport measures export throughput of a 64 MiB mixed layer.
func BenchmarkExport(b *testing.B) {
	requireRoot(b)
	var buf bytes.Buffer
	writeMixedTar(b, &buf, 64)
	layer := filepath.Join(b.TempDir(), "l")
	importBytes(b, New(), buf.Bytes(), layer, nil)
	b.SetBytes(int64(buf.Len()))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := New().ExportLayer(context.Background(), io.Discard, layer); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteBenchTar writes the benchmark tar for hack/bench-import.sh: to
// $WCLAYER_WRITE_BENCH_TAR, $WCLAYER_BENCH_TAR_MB MiB (300 if unset).
func TestWriteBenchTar(t *testing.T) {
	p := os.Getenv("WCLAYER_WRITE_BENCH_TAR")
	if p == "" {
		t.Skip("WCLAYER_WRITE_BENCH_TAR not set (used by hack/bench-import.sh)")
	}
	mb := 300
	if s := os.Getenv("WCLAYER_BENCH_TAR_MB"); s != "" {
		var err error
		if mb, err = strconv.Atoi(s); err != nil {
			t.Fatalf("WCLAYER_BENCH_TAR_MB=%q: %v", s, err)
		}
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	writeMixedTar(t, f, mb)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
