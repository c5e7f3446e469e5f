package wclayer

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Extended attributes this package keeps on layer files (see doc.go).
const (
	xattrHeader   = "trusted.wcow.hdr"
	xattrOpaqueHd = "trusted.wcow.opq"
	xattrImplicit = "trusted.wcow.implicit"
	// xattrOverlayOpaque is overlayfs's opaque-directory marker (Documentation/filesystems/overlayfs.rst).
	xattrOverlayOpaque = "trusted.overlay.opaque"
)

// PAX record names of OCI Windows layers, as go-winio's backuptar writes them.
const (
	PAXFileAttributes = "MSWINDOWS.fileattr"
	PAXRawSD          = "MSWINDOWS.rawsd"
	PAXMountPoint     = "MSWINDOWS.mountpoint"
	PAXCreationTime   = "LIBARCHIVE.creationtime"
)

// Whiteout names of the OCI image layer specification.
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// Windows file attributes used for headers this package makes up (winnt.h).
const (
	fileAttributeDirectory = 0x10
	fileAttributeArchive   = 0x20
)

// Mode type bits as backuptar writes them (it sets no permission bits).
const (
	modeDir     = 0o040000
	modeReg     = 0o100000
	modeSymlink = 0o120000
)

// paxBasic are the PAX keys that archive/tar derives from Header fields; the writer ignores
// them in PAXRecords, so they are not stored.
var paxBasic = map[string]bool{
	"path": true, "linkpath": true, "size": true, "uid": true, "gid": true,
	"uname": true, "gname": true, "mtime": true, "atime": true, "ctime": true,
}

// entryMeta is what trusted.wcow.hdr holds: the tar header of one entry minus what the file
// itself holds (type, size, link target, content).
type entryMeta struct {
	Name     string            `json:"n"`
	Typeflag byte              `json:"t,omitempty"`
	Mode     int64             `json:"m"`
	UID      int               `json:"u,omitempty"`
	GID      int               `json:"g,omitempty"`
	Uname    string            `json:"un,omitempty"`
	Gname    string            `json:"gn,omitempty"`
	ModTime  int64             `json:"mt"`
	ATime    *int64            `json:"at,omitempty"`
	CTime    *int64            `json:"ct,omitempty"`
	Format   tar.Format        `json:"f,omitempty"`
	Devmajor int64             `json:"dj,omitempty"`
	Devminor int64             `json:"dn,omitempty"`
	PAX      map[string]string `json:"x,omitempty"`

	// Hard links share one inode and so one attribute: Primary is the folder-relative path
	// of the entry that was the regular file, Links the headers of the link entries, by
	// folder-relative path, each with the Linkname the tar gave it.
	Primary  string                `json:"p,omitempty"`
	Linkname string                `json:"ln,omitempty"`
	Links    map[string]*entryMeta `json:"l,omitempty"`
}

func timePtr(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	n := t.UnixNano()
	return &n
}

func metaFromHeader(h *tar.Header) *entryMeta {
	m := &entryMeta{
		Name: h.Name, Typeflag: h.Typeflag, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Uname: h.Uname, Gname: h.Gname,
		ModTime: h.ModTime.UnixNano(), ATime: timePtr(h.AccessTime), CTime: timePtr(h.ChangeTime),
		Format: h.Format, Devmajor: h.Devmajor, Devminor: h.Devminor,
	}
	for k, v := range h.PAXRecords {
		if paxBasic[k] || strings.HasPrefix(k, "GNU.sparse.") {
			continue
		}
		if m.PAX == nil {
			m.PAX = make(map[string]string, len(h.PAXRecords))
		}
		m.PAX[k] = v
	}
	return m
}

// header rebuilds a tar header from m; the caller sets type, size and link target.
func (m *entryMeta) header() *tar.Header {
	h := &tar.Header{
		Name: m.Name, Mode: m.Mode, Uid: m.UID, Gid: m.GID, Uname: m.Uname, Gname: m.Gname,
		ModTime: time.Unix(0, m.ModTime), Format: m.Format, Devmajor: m.Devmajor, Devminor: m.Devminor,
	}
	if m.ATime != nil {
		h.AccessTime = time.Unix(0, *m.ATime)
	}
	if m.CTime != nil {
		h.ChangeTime = time.Unix(0, *m.CTime)
	}
	if len(m.PAX) > 0 {
		h.PAXRecords = make(map[string]string, len(m.PAX))
		for k, v := range m.PAX {
			h.PAXRecords[k] = v
		}
	}
	return h
}

func (m *entryMeta) encode() ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encoding metadata of %q: %w", m.Name, err)
	}
	return b, nil
}

func decodeMeta(b []byte) (*entryMeta, error) {
	m := &entryMeta{}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", xattrHeader, err)
	}
	return m, nil
}

// checkPAX refuses oversized or malformed Windows records.
func checkPAX(h *tar.Header) error {
	for k, v := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			// archive/tar would expand the holes: a few header bytes could make any amount
			// of zeros. Windows layer writers (backuptar, hcsshim) write sparse files dense.
			return fmt.Errorf("GNU sparse entries (record %s) are not part of Windows layers", k)
		}
		if len(v) > maxPAXValue {
			return fmt.Errorf("PAX record %s is %d bytes, more than %d", k, len(v), maxPAXValue)
		}
	}
	return nil
}

// synthHeader makes the header of a node that has no stored metadata (a file a container
// created in its scratch layer), in the shape backuptar gives it.
func synthHeader(name string, typ byte, mtime, atime, ctime time.Time) *tar.Header {
	h := &tar.Header{
		Format: tar.FormatPAX, Name: name, Typeflag: typ,
		ModTime: mtime, AccessTime: atime, ChangeTime: ctime,
		PAXRecords: map[string]string{PAXCreationTime: formatPAXTime(mtime)},
	}
	switch typ {
	case tar.TypeDir:
		h.Mode = modeDir
		h.PAXRecords[PAXFileAttributes] = fmt.Sprint(fileAttributeDirectory)
	case tar.TypeSymlink:
		h.Mode = modeSymlink
		h.PAXRecords[PAXFileAttributes] = fmt.Sprint(fileAttributeArchive)
	default:
		h.Mode = modeReg
		h.PAXRecords[PAXFileAttributes] = fmt.Sprint(fileAttributeArchive)
	}
	return h
}

// formatPAXTime formats t as a PAX time value (seconds.nanoseconds), as backuptar does.
func formatPAXTime(t time.Time) string {
	sec, nsec := t.Unix(), t.Nanosecond()
	if nsec == 0 {
		return fmt.Sprintf("%d", sec)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", sec, nsec), "0")
}
