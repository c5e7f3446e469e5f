package wintest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// These tests check BackupRead and BackupWrite as go-winio's BackupFileReader and
// BackupFileWriter use them (hcsshim's layer import and export go through them). Wine 8 has
// neither; hack/wine/winebackup.c fills them in, and these tests are what it must do, as
// Microsoft documents it (BackupRead, BackupWrite, WIN32_STREAM_ID; [MS-BKUP] 2.1).

// backupWrite writes streams to path through BackupWrite, in chunks of chunk bytes so that
// headers and data are split across calls as a caller may split them.
func backupWrite(t *testing.T, path string, chunk int, streams ...stream) error {
	t.Helper()
	var buf bytes.Buffer
	bw := winio.NewBackupStreamWriter(&buf)
	for _, s := range streams {
		if err := bw.WriteHeader(&winio.BackupHeader{Id: s.id, Name: s.name, Size: int64(len(s.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := bw.Write(s.data); err != nil {
			t.Fatal(err)
		}
	}
	f, err := winio.OpenForBackup(path, windows.GENERIC_WRITE|windows.WRITE_DAC|windows.WRITE_OWNER, 0, windows.OPEN_ALWAYS)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := winio.NewBackupFileWriter(f, true)
	b := buf.Bytes()
	for len(b) > 0 {
		n := min(chunk, len(b))
		if _, err := w.Write(b[:n]); err != nil {
			w.Close()
			return err
		}
		b = b[n:]
	}
	return w.Close()
}

type stream struct {
	id   uint32
	name string
	data []byte
}

// backupRead reads every stream of path through BackupRead.
func backupRead(t *testing.T, path string) []stream {
	t.Helper()
	f, err := winio.OpenForBackup(path, windows.GENERIC_READ|windows.READ_CONTROL, 0, windows.OPEN_EXISTING)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := winio.NewBackupFileReader(f, true)
	defer r.Close()
	br := winio.NewBackupStreamReader(r)
	var out []stream
	for {
		h, err := br.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("BackupRead of %s: %v", path, err)
		}
		b, err := io.ReadAll(br)
		if err != nil {
			t.Fatalf("BackupRead of %s: %v", path, err)
		}
		out = append(out, stream{id: h.Id, name: h.Name, data: b})
	}
}

func find(streams []stream, id uint32) *stream {
	for i := range streams {
		if streams[i].id == id {
			return &streams[i]
		}
	}
	return nil
}

func enableBackup(t *testing.T) {
	t.Helper()
	if err := winio.EnableProcessPrivileges([]string{winio.SeBackupPrivilege, winio.SeRestorePrivilege}); err != nil {
		t.Fatalf("SeBackupPrivilege, SeRestorePrivilege: %v", err)
	}
}

// TestBackupRoundTrip: data and a security descriptor written through BackupWrite, split
// anywhere, read back through BackupRead as the same streams.
func TestBackupRoundTrip(t *testing.T) {
	enableBackup(t)
	sd, err := windows.SecurityDescriptorFromString("O:BAG:BAD:P(A;;FA;;;BA)(A;;FR;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	sdBytes := unsafe.Slice((*byte)(unsafe.Pointer(sd)), sd.Length())
	data := bytes.Repeat([]byte("layer file content "), 1000)
	for _, chunk := range []int{1, 7, 20, 4096, 1 << 20} {
		path := filepath.Join(t.TempDir(), "f")
		if err := backupWrite(t, path, chunk, stream{id: winio.BackupSecurity, data: sdBytes}, stream{id: winio.BackupData, data: data}); err != nil {
			t.Fatalf("chunks of %d: BackupWrite: %v", chunk, err)
		}
		if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, data) {
			t.Fatalf("chunks of %d: the file holds %d bytes (%v), want the %d written", chunk, len(b), err, len(data))
		}
		got := backupRead(t, path)
		if d := find(got, winio.BackupData); d == nil || !bytes.Equal(d.data, data) {
			t.Errorf("chunks of %d: BackupRead's data stream differs from what was written", chunk)
		}
		s := find(got, winio.BackupSecurity)
		if s == nil || len(s.data) < 20 || int(sdOf(s.data).Length()) != len(s.data) || !sdOf(s.data).IsValid() {
			t.Fatalf("chunks of %d: BackupRead gave no valid self-relative security descriptor: %+v", chunk, s)
		}
	}
}

// TestBackupSecurityDescriptorKept: the security descriptor a BackupWrite applies is the one
// BackupRead gives back.
func TestBackupSecurityDescriptorKept(t *testing.T) {
	if UnderWine() {
		// BackupWrite applies it with SetKernelObjectSecurity, which succeeds, but Wine 8 keeps
		// no security descriptor on files: it answers one made from the Unix owner and mode.
		t.Skip("Wine 8 does not keep files' security descriptors (a gap not filled yet)")
	}
	enableBackup(t)
	sd, err := windows.SecurityDescriptorFromString("O:BAG:BAD:P(A;;FA;;;BA)(A;;FR;;;WD)")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f")
	sdBytes := unsafe.Slice((*byte)(unsafe.Pointer(sd)), sd.Length())
	if err := backupWrite(t, path, 4096, stream{id: winio.BackupSecurity, data: sdBytes}, stream{id: winio.BackupData, data: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	s := find(backupRead(t, path), winio.BackupSecurity)
	if s == nil {
		t.Fatal("BackupRead gave no security stream")
	}
	if back := sdOf(s.data).String(); back != sd.String() {
		t.Errorf("security descriptor read back = %s, want %s", back, sd)
	}
}

// TestBackupReadFolder: a folder has no data stream, only its security descriptor.
func TestBackupReadFolder(t *testing.T) {
	enableBackup(t)
	dir := t.TempDir()
	got := backupRead(t, dir)
	if find(got, winio.BackupData) != nil {
		t.Error("BackupRead of a folder gave a data stream")
	}
	if find(got, winio.BackupSecurity) == nil {
		t.Error("BackupRead of a folder gave no security stream")
	}
}

// TestBackupWriteRefusesUnknownStreams: [MS-BKUP] 2.1: a writer MUST fail on a stream id it
// does not implement, rather than drop the stream.
func TestBackupWriteRefusesUnknownStreams(t *testing.T) {
	enableBackup(t)
	path := filepath.Join(t.TempDir(), "f")
	err := backupWrite(t, path, 4096, stream{id: winio.BackupEaData, data: []byte("extended attributes")})
	if err == nil {
		t.Fatal("BackupWrite of an extended attribute stream succeeded")
	}
}

// TestBackupWriteNamedStream: an alternate data stream is written to "<file>:<name>"; where
// the volume has no named streams (Wine 8's never have), BackupWrite fails with
// ERROR_NOT_SUPPORTED and leaves nothing beside the file: the stream is never silently
// dropped or misplaced.
func TestBackupWriteNamedStream(t *testing.T) {
	enableBackup(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	err := backupWrite(t, path, 4096, stream{id: winio.BackupData, data: []byte("main")},
		stream{id: winio.BackupAlternateData, name: ":extra:$DATA", data: []byte("named")})
	if UnderWine() {
		if !errors.Is(err, windows.ERROR_NOT_SUPPORTED) {
			t.Errorf("BackupWrite of a named stream under Wine = %v, want ERROR_NOT_SUPPORTED", err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("the folder holds %d entries, want only the file", len(entries))
		}
		return
	}
	if err != nil {
		t.Fatalf("BackupWrite of a named stream: %v", err)
	}
	if b, err := os.ReadFile(path + ":extra"); err != nil || string(b) != "named" {
		t.Errorf("the named stream holds %q, %v", b, err)
	}
}

// sdOf views a self-relative security descriptor's bytes as one.
func sdOf(b []byte) *windows.SECURITY_DESCRIPTOR {
	return (*windows.SECURITY_DESCRIPTOR)(unsafe.Pointer(&b[0]))
}

// symlinkReparse is a REPARSE_DATA_BUFFER of a relative symbolic link to target
// (IO_REPARSE_TAG_SYMLINK, SYMLINK_FLAG_RELATIVE), as a layer tar's symlink becomes one.
func symlinkReparse(target string) []byte {
	name := windows.StringToUTF16(target)
	name = name[:len(name)-1]
	n := len(name) * 2
	var b bytes.Buffer
	le := func(v any) { _ = binaryWrite(&b, v) }
	le(uint32(windows.IO_REPARSE_TAG_SYMLINK))
	le(uint16(12 + 2*n))
	le(uint16(0))
	le(uint16(0)) // substitute name offset
	le(uint16(n)) // substitute name length
	le(uint16(n)) // print name offset
	le(uint16(n)) // print name length
	le(uint32(1)) // SYMLINK_FLAG_RELATIVE
	le(name)
	le(name)
	return b.Bytes()
}

// TestBackupWriteReparsePoint: a reparse point written through BackupWrite is set on the file
// (FSCTL_SET_REPARSE_POINT) and read back through BackupRead; where the file system cannot hold
// one (Wine 8 answers FSCTL_SET_REPARSE_POINT with STATUS_NOT_SUPPORTED), BackupWrite fails
// with that error instead of reporting success for an ordinary file.
func TestBackupWriteReparsePoint(t *testing.T) {
	enableBackup(t)
	path := filepath.Join(t.TempDir(), "link")
	rp := symlinkReparse(`target.txt`)
	err := backupWrite(t, path, 4096, stream{id: winio.BackupReparseData, data: rp})
	if UnderWine() {
		if !errors.Is(err, windows.ERROR_NOT_SUPPORTED) {
			t.Errorf("BackupWrite of a reparse point under Wine = %v, want ERROR_NOT_SUPPORTED", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("BackupWrite of a reparse point: %v", err)
	}
	s := find(backupRead(t, path), winio.BackupReparseData)
	if s == nil || !bytes.Equal(s.data, rp) {
		t.Errorf("BackupRead's reparse stream = %+v, want the reparse point written", s)
	}
}

func binaryWrite(b *bytes.Buffer, v any) error { return binary.Write(b, binary.LittleEndian, v) }
