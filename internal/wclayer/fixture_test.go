package wclayer

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/testenv"
)

// requireRoot skips tests that need CAP_SYS_ADMIN (trusted.* xattrs, whiteout device nodes,
// mounts) when not root, unless CI=true, where they must run.
func requireRoot(tb testing.TB) {
	tb.Helper()
	testenv.RequireRoot(tb, "trusted.* xattrs, mknod, mount")
}

// fent is one entry of a fixture tar.
type fent struct {
	name     string
	typ      byte
	body     string
	link     string
	attrs    uint32
	sd       []byte
	mount    bool
	noWinHdr bool // a plain entry without Windows records (whiteouts, odd writers)
	pax      map[string]string
}

// sampleSD is a self-relative security descriptor (O:BAG:SYD:(A;;FA;;;SY)), the shape
// MSWINDOWS.rawsd carries.
var sampleSD = []byte{
	0x01, 0x00, 0x04, 0x80, 0x14, 0x00, 0x00, 0x00, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x30, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x20, 0x00, 0x00, 0x00,
	0x20, 0x02, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
	0x02, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0xff, 0x01, 0x1f, 0x00,
	0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x12, 0x00, 0x00, 0x00,
}

var fixtureEpoch = time.Date(2021, 8, 7, 6, 5, 4, 321987654, time.UTC)

// winTar writes entries the way go-winio's backuptar.WriteTarFileFromBackupStream and
// hcsshim's ociwclayer do: PAX format, mode with only the type bits, the four Windows records,
// nanosecond times. (backuptar itself only builds on Windows.)
func winTar(tb testing.TB, ents []fent) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, e := range ents {
		t := fixtureEpoch.Add(time.Duration(i) * 1234567891)
		h := &tar.Header{
			Format: tar.FormatPAX, Name: e.name, Typeflag: e.typ, Linkname: e.link,
			ModTime: t, AccessTime: t.Add(time.Second), ChangeTime: t.Add(2 * time.Second),
		}
		if !e.noWinHdr {
			h.PAXRecords = map[string]string{
				PAXFileAttributes: fmt.Sprint(e.attrs),
				PAXCreationTime:   formatPAXTime(t.Add(-time.Hour)),
			}
			if e.sd != nil {
				h.PAXRecords[PAXRawSD] = base64.StdEncoding.EncodeToString(e.sd)
			}
			if e.mount {
				h.PAXRecords[PAXMountPoint] = "1"
			}
		}
		for k, v := range e.pax {
			if h.PAXRecords == nil {
				h.PAXRecords = map[string]string{}
			}
			h.PAXRecords[k] = v
		}
		switch e.typ {
		case tar.TypeDir:
			h.Mode = modeDir
		case tar.TypeSymlink:
			h.Mode = modeSymlink
		default:
			h.Mode = modeReg
		}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatalf("fixture header %q: %v", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := io.WriteString(tw, e.body); err != nil {
				tb.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// tarEntry is an entry of a tar reduced to what a round trip must keep.
type tarEntry struct {
	Name, Linkname, Uname, Gname   string
	Typeflag                       byte
	Size, Mode                     int64
	UID, GID                       int
	ModTime, AccessTime, ChangeTim time.Time
	PAX                            string
	Content                        string // sha256
}

func readEntries(tb testing.TB, b []byte) map[string]tarEntry {
	tb.Helper()
	out := map[string]tarEntry{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("reading tar: %v", err)
		}
		sum := sha256.New()
		if _, err := io.Copy(sum, tr); err != nil {
			tb.Fatal(err)
		}
		var pax []string
		for k, v := range h.PAXRecords {
			if !paxBasic[k] {
				pax = append(pax, k+"="+v)
			}
		}
		sort.Strings(pax)
		if _, dup := out[h.Name]; dup {
			tb.Fatalf("entry %q twice in the tar", h.Name)
		}
		out[h.Name] = tarEntry{
			Name: h.Name, Linkname: h.Linkname, Uname: h.Uname, Gname: h.Gname, Typeflag: h.Typeflag,
			Size: h.Size, Mode: h.Mode, UID: h.Uid, GID: h.Gid,
			ModTime: h.ModTime.UTC(), AccessTime: h.AccessTime.UTC(), ChangeTim: h.ChangeTime.UTC(),
			PAX: strings.Join(pax, ";"), Content: hex.EncodeToString(sum.Sum(nil)),
		}
	}
	return out
}

// diffEntries describes how got differs from want, or "" when they hold the same entries.
func diffEntries(want, got map[string]tarEntry) string {
	var d []string
	for n, w := range want {
		g, ok := got[n]
		switch {
		case !ok:
			d = append(d, fmt.Sprintf("missing %q", n))
		case g != w:
			d = append(d, fmt.Sprintf("%q:\n  want %+v\n  got  %+v", n, w, g))
		}
	}
	for n := range got {
		if _, ok := want[n]; !ok {
			d = append(d, fmt.Sprintf("unexpected %q", n))
		}
	}
	sort.Strings(d)
	return strings.Join(d, "\n")
}
