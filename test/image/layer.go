package image

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PAX record names of Windows metadata, as go-winio's backuptar writes and reads them.
const (
	paxFileAttr     = "MSWINDOWS.fileattr"
	paxRawSD        = "MSWINDOWS.rawsd"
	paxCreationTime = "LIBARCHIVE.creationtime"
)

// WhiteoutPrefix marks a deleted file in an upper layer (OCI image spec, layer.md).
const WhiteoutPrefix = ".wh."

// layerRoots are the top-level folders a Windows layer tar may have.
var layerRoots = map[string]bool{"Files": true, "Hives": true, "UtilityVM": true}

// tar renders the layer. Entries are sorted by path, every folder comes before its contents,
// and each entry carries the PAX records of a real Windows layer.
func (l Layer) tar(mtime time.Time) ([]byte, error) {
	type item struct {
		path string
		e    Entry
	}
	items := map[string]item{}
	for _, e := range l.Entries {
		p := path.Clean(strings.TrimPrefix(e.Path, "/"))
		if strings.Contains(e.Path, `\`) {
			return nil, fmt.Errorf("entry %q: use forward slashes", e.Path)
		}
		root := strings.SplitN(p, "/", 2)[0]
		if !layerRoots[root] {
			return nil, fmt.Errorf("entry %q: a Windows layer path starts with Files/, Hives/ or UtilityVM/", e.Path)
		}
		if e.Whiteout {
			dir, base := path.Split(p)
			if dir == "" {
				return nil, fmt.Errorf("entry %q: cannot white out a layer root", e.Path)
			}
			p = dir + WhiteoutPrefix + base
			e = Entry{Path: p, Mode: 0o644}
		}
		if _, dup := items[p]; dup {
			return nil, fmt.Errorf("entry %q appears twice", e.Path)
		}
		items[p] = item{path: p, e: e}
		// Parent folders, as a real layer lists them.
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if _, ok := items[dir]; !ok {
				items[dir] = item{path: dir, e: Entry{Path: dir, Dir: true}}
			}
		}
	}
	paths := make([]string, 0, len(items))
	for p, it := range items {
		if l := it.e.Link; l != "" {
			if t, ok := items[path.Clean(l)]; !ok || t.e.Dir || t.e.Link != "" || t.e.Whiteout {
				return nil, fmt.Errorf("entry %q: hard link target %q is not a file of this layer", it.e.Path, l)
			}
		}
		paths = append(paths, p)
	}
	// Hard links last: a link's target must come before it in the tar.
	sort.Slice(paths, func(i, j int) bool {
		li, lj := items[paths[i]].e.Link != "", items[paths[j]].e.Link != ""
		if li != lj {
			return lj
		}
		return paths[i] < paths[j]
	})

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := items[p].e
		hdr := &tar.Header{
			Name:       p,
			ModTime:    mtime,
			AccessTime: mtime,
			ChangeTime: mtime,
			Format:     tar.FormatPAX,
			PAXRecords: map[string]string{
				paxCreationTime: fmt.Sprintf("%d.%09d", mtime.Unix(), mtime.Nanosecond()),
				paxRawSD:        defaultSD,
			},
		}
		attr := e.Attributes
		if e.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			hdr.Mode = 0o755
			if attr == 0 {
				attr = FileAttributeDirectory
			}
		} else if e.Link != "" {
			hdr.Typeflag = tar.TypeLink
			hdr.Linkname = path.Clean(e.Link)
			hdr.Mode = 0o644
			if strings.HasSuffix(strings.ToLower(p), ".exe") {
				hdr.Mode = 0o755
			}
			if attr == 0 {
				attr = FileAttributeArchive
			}
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(e.Data))
			hdr.Mode = 0o644
			if strings.HasSuffix(strings.ToLower(p), ".exe") {
				hdr.Mode = 0o755
			}
			if attr == 0 {
				attr = FileAttributeArchive
			}
		}
		if e.Mode != 0 {
			hdr.Mode = e.Mode
		}
		hdr.PAXRecords[paxFileAttr] = strconv.FormatUint(uint64(attr), 10)
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("entry %q: %w", p, err)
		}
		if !e.Dir && e.Link == "" && len(e.Data) > 0 {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("entry %q: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// defaultSD is the base64 of a self-relative SECURITY_DESCRIPTOR (MS-DTYP 2.4.6) that every
// entry carries as MSWINDOWS.rawsd: owner BUILTIN\Administrators, group NT AUTHORITY\SYSTEM and a
// DACL that, as a Windows base image's system folders do, lets only administrators write:
// BUILTIN\Administrators and NT AUTHORITY\SYSTEM full access, everyone else read and execute
// (a base image grants that to BUILTIN\Users; Everyone here, which for a container's accounts is
// the same). Where the layer is imported through the backup APIs (under Wine: hack/wine
// winebackup.c applies the descriptor, and Wine turns its DACL into the file's mode) this is what
// keeps ContainerUser from writing there, as hcsemu's own importer does by writing layers as root
// (docs/emulator.md, "Users and gMSA").
var defaultSD = base64.StdEncoding.EncodeToString(selfRelativeSD())

func selfRelativeSD() []byte {
	// SIDs in binary form (MS-DTYP 2.4.2.2): revision, sub-authority count, 6-byte big-endian
	// identifier authority, little-endian sub-authorities.
	sid := func(authority byte, subs ...uint32) []byte {
		b := []byte{1, byte(len(subs)), 0, 0, 0, 0, 0, authority}
		for _, s := range subs {
			b = binary.LittleEndian.AppendUint32(b, s)
		}
		return b
	}
	admins := sid(5, 32, 544) // S-1-5-32-544
	system := sid(5, 18)      // S-1-5-18
	world := sid(1, 0)        // S-1-1-0

	// ACCESS_ALLOWED_ACEs (type 0, flags 0) with FILE_ALL_ACCESS (0x001F01FF) or
	// FILE_GENERIC_READ|FILE_GENERIC_EXECUTE (0x001200A9).
	ace := func(mask uint32, sid []byte) []byte {
		a := []byte{0, 0, 0, 0}
		a = binary.LittleEndian.AppendUint32(a, mask)
		a = append(a, sid...)
		binary.LittleEndian.PutUint16(a[2:], uint16(len(a)))
		return a
	}
	aces := [][]byte{ace(0x001F01FF, admins), ace(0x001F01FF, system), ace(0x001200A9, world)}
	// ACL header: revision 2, pad, size, ACE count, pad.
	acl := []byte{2, 0, 0, 0, byte(len(aces)), 0, 0, 0}
	for _, a := range aces {
		acl = append(acl, a...)
	}
	binary.LittleEndian.PutUint16(acl[2:], uint16(len(acl)))

	const headerSize = 20
	const control = 0x8004 // SE_SELF_RELATIVE | SE_DACL_PRESENT
	ownerOff := headerSize
	groupOff := ownerOff + len(admins)
	daclOff := groupOff + len(system)
	b := []byte{1, 0}
	b = binary.LittleEndian.AppendUint16(b, control)
	b = binary.LittleEndian.AppendUint32(b, uint32(ownerOff))
	b = binary.LittleEndian.AppendUint32(b, uint32(groupOff))
	b = binary.LittleEndian.AppendUint32(b, 0) // no SACL
	b = binary.LittleEndian.AppendUint32(b, uint32(daclOff))
	b = append(b, admins...)
	b = append(b, system...)
	b = append(b, acl...)
	return b
}
