package storage

import (
	"archive/tar"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"golang.org/x/sys/unix"

	"github.com/openhcs/runhcs/internal/atomicfile"
	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
	"github.com/openhcs/runhcs/internal/wclayer"
)

// vmcompute's ImportLayer and ExportLayer, for layers over parents. hcsshim never hands them a
// tar: its legacy layer writer (internal/wclayer/legacy.go, importlayer.go) fills an import
// folder that ImportLayer turns into the layer, and its legacy reader walks the folder that
// ExportLayer fills. That folder's layout is hcsshim's, and this file reads and writes exactly it:
//
//   - Files\<path>: for a file, its attributes (4 bytes, little endian) and then its Win32 backup
//     stream (data, security descriptor, …; backupstream.go); for a directory, a directory of that
//     name and a file <path>.$wcidirs$ beside it holding the directory's attributes and stream.
//     The file's times are the entry's (set through the file; the attributes are not).
//   - Hives\<name>: a registry hive delta's bytes; Files and Hives themselves are directories whose
//     times the reader takes from Hives\System_Delta.
//   - tombstones.txt (export only): a UTF-8 byte order mark and "Version 1.0", then one line per
//     deleted name, "\<path under Files>". hcsshim's reader requires the file.
//
// The layer itself is the emulator's format, made and read by internal/wclayer's folder importer
// and exporter (the tar headers in trusted.wcow.hdr, whiteouts as overlayfs's), so ImportLayer
// converts the folder to a tar on the fly and imports that, and ExportLayer the reverse: what
// the backup streams carry (attributes, security descriptor, times) reaches the same place as
// through the Linux build's import.
//
// Deletions. hcsshim does not give ImportLayer the layer's tombstones: after the call it removes
// each deleted name from the layer folder itself, ignoring names that are not there (importlayer.go;
// hcsshim commits 731a68d7e "block tombstones" and a0adf94c0). So on Windows the folder that
// ImportLayer leaves shows the parents' names too, and removing one records its deletion.
// Assumption (how vmcompute represents them is not documented): the emulator leaves a placeholder
// for every name of the parents' merged view that the layer does not write, in the folders the
// layer does write — an empty directory or file marked with trusted.wcow.placeholder — and lists
// them in the layer folder (placeholderFile). A placeholder directory stays empty: it holds no
// placeholders of the parents' names beneath it, so that hcsshim's removal of it (a tar's
// whiteout of a parent's folder, however full: hcsshim removes only the one name, with
// safefile.RemoveRelative, which refuses a folder that is not empty) succeeds, and the folder
// with all it holds is gone from the merged view, as a whiteout of a folder means in an OCI layer
// (opencontainers/image-spec layer.md, "Whiteouts": the named path and its children are
// removed). The cost: a deletion under a parent's folder that the tar does not
// itself list finds no name to remove (hcsshim ignores a name that is not there) and is not
// recorded; the writers of image layers (containerd's, Docker's, BuildKit's) list the folder of
// every change. The next storage call that uses the layer (activating, preparing over it,
// importing or exporting with it, making a scratch over it) settles them: a placeholder that is
// gone becomes a whiteout, the others go, a directory placeholder that now holds something (a
// hard link hcsshim made in it) stays as an implicit directory.
//
// Not emulated: reparse points (symbolic links, mount points), named streams and extended
// attributes in the backup streams; they are refused with E_NOTIMPL naming the file. Utility VM
// files are written by hcsshim into the layer folder directly and are left as they are.

const (
	// placeholderFile lists a freshly imported layer's placeholders (slash-separated paths under
	// Files/) until they are settled.
	placeholderFile = ".hcsemu-placeholders.json"
	// xattrPlaceholder marks a placeholder; xattrImplicit is internal/wclayer's mark of a
	// directory the layer's tar did not name (doc.go there).
	xattrPlaceholder = "trusted.wcow.placeholder"
	xattrImplicit    = "trusted.wcow.implicit"
	// wciDirSuffix names the file that carries a directory's metadata in the legacy layout.
	wciDirSuffix = ".$wcidirs$"
	// tombstonesHeader opens tombstones.txt (hcsshim's readTombstones checks it).
	tombstonesHeader = "\xef\xbb\xbfVersion 1.0"
	// PAX records of Windows layer tars (go-winio's backuptar).
	paxFileAttr     = "MSWINDOWS.fileattr"
	paxRawSD        = "MSWINDOWS.rawsd"
	paxCreationTime = "LIBARCHIVE.creationtime"
	// Windows file attributes (winnt.h) for entries without recorded ones.
	attrDirectory = 0x10
	attrArchive   = 0x20
	// Mode type bits as backuptar writes them (no permission bits).
	tarModeDir = 0o040000
	tarModeReg = 0o100000
)

// errConversionEnded closes the pipe between a converter and internal/wclayer once the other
// side has returned, so that the side still running stops, and its error is known for what it is.
var errConversionEnded = errors.New("the other side of the conversion returned")

// legacyErr is an error of the folder's content, with the HRESULT it answers.
type legacyErr struct {
	hr  computecore.HRESULT
	msg string
}

func (e *legacyErr) Error() string { return e.msg }

func notEmulatedEntry(rel, what string) error {
	return &legacyErr{hr: computecore.E_NOTIMPL, msg: fmt.Sprintf("%s: %s is not emulated by hcsemu", rel, what)}
}

func badEntry(rel, format string, a ...any) error {
	return &legacyErr{hr: computecore.E_INVALIDARG, msg: rel + ": " + fmt.Sprintf(format, a...)}
}

// hresultOf answers err: a legacyErr's own HRESULT, E_INVALIDARG for what internal/wclayer
// refused, E_FAIL for anything else.
func hresultOf(err error) computecore.HRESULT {
	var le *legacyErr
	switch {
	case errors.As(err, &le):
		return le.hr
	case errdefs.IsInvalidArgument(err):
		return computecore.E_INVALIDARG
	default:
		return computecore.E_FAIL
	}
}

// layerParents checks the Parents of a call and settles any placeholders they still hold.
func layerParents(parents []string) ([]string, error) {
	out := make([]string, len(parents))
	for i, p := range parents {
		field := fmt.Sprintf("Parents[%d]", i)
		var err error
		if out[i], err = layerFolder(field, p); err != nil {
			return nil, err
		}
		if err := settlePlaceholders(out[i]); err != nil {
			return nil, hresult.Errorf(computecore.E_FAIL, "%s: %v", field, err)
		}
	}
	return out, nil
}

// Import is ImportLayer: the import folder a.Source becomes the layer a.Path (which hcsshim has
// created, and where it may already have put UtilityVM\) over a.Parents.
func (f *Filter) Import(ctx context.Context, a wire.LayerArgs) error {
	dest, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	src, err := layerFolder("Source", a.Source)
	if err != nil {
		return err
	}
	parents, err := layerParents(a.Parents)
	if err != nil {
		return err
	}
	if f.active(dest) {
		return hresult.Errorf(hresult.ErrBusy, "Path: layer %q is activated", dest)
	}
	for _, d := range []string{wclayer.FilesDir, wclayer.HivesDir} {
		if _, err := os.Lstat(filepath.Join(dest, d)); err == nil {
			return hresult.Errorf(hresult.ErrFileExists, "Path: layer %q already has a %s folder", dest, d)
		}
	}

	// internal/wclayer imports into a folder of its own, which replaces its destination only
	// when the whole tar was read; that folder's Files and Hives then move into the layer.
	tmp, err := os.MkdirTemp(dest, ".hcsemu-import-")
	if err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: %v", err)
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "layer")
	pr, pw := io.Pipe()
	conv := make(chan error, 1)
	go func() {
		err := legacyToTar(src, pw)
		pw.CloseWithError(err)
		conv <- err
	}()
	_, ierr := wclayer.New().ImportLayer(ctx, pr, staged, parents, wclayer.ImportOptions{})
	pr.CloseWithError(errConversionEnded)
	cerr := <-conv
	if cerr != nil && !errors.Is(cerr, errConversionEnded) {
		return hresult.Errorf(hresultOf(cerr), "Source: import folder %q: %v", src, cerr)
	}
	if ierr != nil {
		return hresult.Errorf(hresultOf(ierr), "Source: import folder %q: %v", src, ierr)
	}
	var moved []string
	for _, d := range []string{wclayer.FilesDir, wclayer.HivesDir, wclayer.LayerChainFile} {
		from := filepath.Join(staged, d)
		if _, err := os.Lstat(from); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Rename(from, filepath.Join(dest, d)); err != nil {
			for _, m := range moved {
				os.RemoveAll(filepath.Join(dest, m))
			}
			return hresult.Errorf(computecore.E_FAIL, "Path: moving the imported %s into %q: %v", d, dest, err)
		}
		moved = append(moved, d)
	}
	n, err := makePlaceholders(dest, parents)
	if err != nil {
		for _, m := range moved {
			os.RemoveAll(filepath.Join(dest, m))
		}
		os.Remove(filepath.Join(dest, placeholderFile))
		return hresult.Errorf(computecore.E_FAIL, "Path: %v", err)
	}
	log.G(ctx).WithFields(log.Fields{"layer": dest, "parents": len(parents), "placeholders": n}).Info("hcsemu: layer imported")
	return nil
}

// legacyToTar writes the import folder root as a Windows layer tar, in the shape go-winio's
// backuptar gives one (PAX records for attributes, security descriptor and creation time).
func legacyToTar(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == "tombstones.txt" || strings.HasSuffix(name, wciDirSuffix):
			continue
		case name != wclayer.FilesDir && name != wclayer.HivesDir:
			return badEntry(name, "not a folder of hcsshim's import layout (Files, Hives)")
		}
		if err := legacyEntry(tw, root, name); err != nil {
			return err
		}
	}
	return tw.Close()
}

// legacyEntry writes the entry rel (slash-separated) of the import folder and what is under it.
func legacyEntry(tw *tar.Writer, root, rel string) error {
	p := filepath.Join(root, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	inFiles := strings.HasPrefix(rel, wclayer.FilesDir+"/")
	switch {
	case fi.IsDir():
		meta := p + wciDirSuffix
		h := &tar.Header{Typeflag: tar.TypeDir, Name: rel, Mode: tarModeDir}
		if mf, err := os.Lstat(meta); err == nil {
			if err := legacyMetadata(h, meta, mf, true); err != nil {
				return err
			}
		} else {
			setHeaderTimes(h, fi, attrDirectory)
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), wciDirSuffix) {
				continue
			}
			if err := legacyEntry(tw, root, rel+"/"+e.Name()); err != nil {
				return err
			}
		}
		return nil
	case !fi.Mode().IsRegular():
		return badEntry(rel, "is a %s, not a file or folder", fi.Mode().Type())
	case inFiles:
		h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: tarModeReg}
		file, err := os.Open(p)
		if err != nil {
			return err
		}
		defer file.Close()
		data, err := legacyFile(h, file, fi)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if data != nil {
			if _, err := io.Copy(tw, data); err != nil {
				return err
			}
		}
		return nil
	default:
		// A hive: its bytes as they are. hcsshim sets its times but not its attributes.
		h := &tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: tarModeReg, Size: fi.Size()}
		setHeaderTimes(h, fi, attrArchive)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		file, err := os.Open(p)
		if err != nil {
			return err
		}
		defer file.Close()
		_, err = io.Copy(tw, file)
		return err
	}
}

// setHeaderTimes fills h's times from fi, and its attributes when it has none: Linux keeps no creation
// time that can be set, so the creation time is the modification time.
func setHeaderTimes(h *tar.Header, fi fs.FileInfo, attrs uint32) {
	h.Format = tar.FormatPAX
	h.ModTime = fi.ModTime()
	h.AccessTime, h.ChangeTime = h.ModTime, h.ModTime
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.AccessTime = time.Unix(st.Atim.Sec, st.Atim.Nsec)
		h.ChangeTime = time.Unix(st.Ctim.Sec, st.Ctim.Nsec)
	}
	if h.PAXRecords == nil {
		h.PAXRecords = map[string]string{}
	}
	h.PAXRecords[paxCreationTime] = paxTime(h.ModTime)
	if _, ok := h.PAXRecords[paxFileAttr]; !ok {
		h.PAXRecords[paxFileAttr] = strconv.FormatUint(uint64(attrs), 10)
	}
}

// paxTime formats t as a PAX time (seconds.nanoseconds), as backuptar does.
func paxTime(t time.Time) string {
	if t.Nanosecond() == 0 {
		return strconv.FormatInt(t.Unix(), 10)
	}
	return strings.TrimRight(fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond()), "0")
}

// legacyMetadata fills h from a directory's .$wcidirs$ file: attributes, then a backup stream
// that may hold its security descriptor.
func legacyMetadata(h *tar.Header, p string, fi fs.FileInfo, dir bool) error {
	file, err := os.Open(p)
	if err != nil {
		return err
	}
	defer file.Close()
	data, err := legacyFile(h, file, fi)
	if err != nil {
		return err
	}
	if data != nil && dir {
		return badEntry(h.Name, "a folder's metadata holds a data stream")
	}
	return nil
}

// legacyFile reads a file of the legacy layout (attributes and backup stream) into h and returns
// the reader of its data stream (nil without one).
func legacyFile(h *tar.Header, file *os.File, fi fs.FileInfo) (io.Reader, error) {
	var attr [4]byte
	if _, err := io.ReadFull(file, attr[:]); err != nil {
		return nil, badEntry(h.Name, "no attributes before the backup stream: %v", err)
	}
	h.PAXRecords = map[string]string{paxFileAttr: strconv.FormatUint(uint64(binary.LittleEndian.Uint32(attr[:])), 10)}
	setHeaderTimes(h, fi, 0)
	body := io.NewSectionReader(file, 4, fi.Size()-4)
	streams, err := readBackupStreams(body, body.Size())
	if err != nil {
		return nil, badEntry(h.Name, "%v", err)
	}
	var data io.Reader
	for _, s := range streams {
		switch s.ID {
		case backupData:
			if data != nil {
				return nil, badEntry(h.Name, "two data streams")
			}
			data = io.NewSectionReader(body, s.Offset, s.Size)
			h.Size = s.Size
		case backupSecurity:
			sd, err := readStreamData(body, s)
			if err != nil {
				return nil, badEntry(h.Name, "%v", err)
			}
			h.PAXRecords[paxRawSD] = base64.StdEncoding.EncodeToString(sd)
		case backupReparseData:
			return nil, notEmulatedEntry(h.Name, "a reparse point (symbolic link or mount point)")
		case backupAlternateData:
			return nil, notEmulatedEntry(h.Name, "a named stream")
		case backupEAData:
			return nil, notEmulatedEntry(h.Name, "an extended attribute")
		default:
			return nil, notEmulatedEntry(h.Name, fmt.Sprintf("backup stream id %d", s.ID))
		}
	}
	return data, nil
}

// makePlaceholders leaves in layer's Files/ a placeholder for every name of its parents' merged
// view that the layer does not have, in the folders the layer has (a placeholder folder stays
// empty), and lists them in placeholderFile. It returns how many.
func makePlaceholders(layer string, parents []string) (int, error) {
	var made []string
	var walk func(rel string, srcs []string) error
	// walk places the placeholders of the folder rel, which merges the folders srcs.
	walk = func(rel string, srcs []string) error {
		have, err := foldedNames(filepath.Join(layer, wclayer.FilesDir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		for _, c := range mergedChildren(srcs) {
			crel := path.Join(rel, c.name)
			p := filepath.Join(layer, wclayer.FilesDir, filepath.FromSlash(crel))
			if own, ok := have[strings.ToUpper(c.name)]; ok {
				fi, err := os.Lstat(filepath.Join(filepath.Dir(p), own))
				if err != nil {
					return err
				}
				opq, _ := lgetxattr(filepath.Join(filepath.Dir(p), own), "trusted.overlay.opaque")
				if fi.IsDir() && c.dirs != nil && string(opq) != "y" {
					if err := walk(path.Join(rel, own), c.dirs); err != nil {
						return err
					}
				}
				continue
			}
			if c.dirs != nil {
				if err := os.Mkdir(p, 0o755); err != nil {
					return err
				}
				for _, x := range []string{xattrPlaceholder, xattrImplicit} {
					if err := unix.Lsetxattr(p, x, []byte("1"), 0); err != nil {
						return &os.PathError{Op: "setxattr " + x, Path: p, Err: err}
					}
				}
				// Nothing beneath it (see the file's comment): removable as a whole.
				made = append(made, crel)
				continue
			}
			fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
			if err != nil {
				return &os.PathError{Op: "create", Path: p, Err: err}
			}
			err = unix.Fsetxattr(fd, xattrPlaceholder, []byte("1"), 0)
			unix.Close(fd)
			if err != nil {
				return &os.PathError{Op: "setxattr", Path: p, Err: err}
			}
			made = append(made, crel)
		}
		return nil
	}
	var srcs []string
	for _, p := range parents {
		srcs = append(srcs, filepath.Join(p, wclayer.FilesDir))
	}
	if _, err := os.Stat(filepath.Join(layer, wclayer.FilesDir)); errors.Is(err, fs.ErrNotExist) {
		if err := os.Mkdir(filepath.Join(layer, wclayer.FilesDir), 0o755); err != nil {
			return 0, err
		}
	}
	if err := walk("", srcs); err != nil {
		return 0, fmt.Errorf("placeholders of the parents' files: %w", err)
	}
	b, _ := json.Marshal(made)
	if err := atomicfile.WriteFile(filepath.Join(layer, placeholderFile), b, 0o644); err != nil {
		return 0, err
	}
	return len(made), nil
}

// foldedNames lists a folder's names by their upper case (NTFS compares names so); a missing
// folder has none.
func foldedNames(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(entries))
	for _, e := range entries {
		m[strings.ToUpper(e.Name())] = e.Name()
	}
	return m, nil
}

// mergedChild is a name of a merged view: its spelling in the nearest layer that has it and,
// for a directory, the directories (nearest first) whose contents merge beneath it.
type mergedChild struct {
	name string
	dirs []string // nil: not a directory
}

// mergedChildren is what the folders srcs (nearest first, the same folder in each of a chain
// of layers) show merged as the storage filter merges them: a name comes from the nearest
// folder that has it, a whiteout hides it below, an opaque directory hides what lies below it.
func mergedChildren(srcs []string) []mergedChild {
	seen := map[string]bool{}
	var out []mergedChild
	index := map[string]int{}
	for _, dir := range srcs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			key := strings.ToUpper(e.Name())
			p := filepath.Join(dir, e.Name())
			fi, err := os.Lstat(p)
			if err != nil {
				continue
			}
			if j, ok := index[key]; ok {
				// A lower directory of the same name merges in, unless a nearer layer
				// made the name something else or made its directory opaque.
				if c := &out[j]; c.dirs != nil && fi.IsDir() && !opaqueBelow(c.dirs[len(c.dirs)-1]) {
					c.dirs = append(c.dirs, p)
				}
				continue
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			if fi.Mode()&fs.ModeCharDevice != 0 {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Rdev == 0 {
					continue // a whiteout: the name is gone from here down
				}
			}
			c := mergedChild{name: e.Name()}
			if fi.IsDir() {
				c.dirs = []string{p}
			}
			index[key] = len(out)
			out = append(out, c)
		}
	}
	return out
}

func opaqueBelow(dir string) bool {
	v, _ := lgetxattr(dir, "trusted.overlay.opaque")
	return string(v) == "y"
}

func lgetxattr(p, name string) ([]byte, error) {
	buf := make([]byte, 64)
	n, err := unix.Lgetxattr(p, name, buf)
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

// settlePlaceholders settles the placeholders ImportLayer left in layer, if any: see the file's
// comment. It is idempotent, and quick for a layer without any.
func settlePlaceholders(layer string) error {
	rec := filepath.Join(layer, placeholderFile)
	b, err := os.ReadFile(rec)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	if err := json.Unmarshal(b, &names); err != nil {
		return fmt.Errorf("reading %s: %w", rec, err)
	}
	sort.Strings(names) // a folder before what is in it
	files := filepath.Join(layer, wclayer.FilesDir)
	gone := map[string]bool{}
	under := func(n string) bool {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if gone[d] {
				return true
			}
		}
		return false
	}
	var keep []string
	for _, n := range names {
		if under(n) {
			continue
		}
		p := filepath.Join(files, filepath.FromSlash(n))
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			// Removed after the import: a deletion, recorded as the emulator's layers
			// record one (internal/wclayer: an overlayfs whiteout).
			if err := unix.Mknod(p, unix.S_IFCHR, 0); err != nil && !errors.Is(err, unix.EEXIST) {
				return &os.PathError{Op: "mknod whiteout", Path: p, Err: err}
			}
			gone[n] = true
			continue
		} else if err != nil {
			return err
		}
		keep = append(keep, n)
	}
	for i := len(keep) - 1; i >= 0; i-- {
		p := filepath.Join(files, filepath.FromSlash(keep[i]))
		if v, _ := lgetxattr(p, xattrPlaceholder); string(v) != "1" {
			continue // replaced (a hard link hcsshim made after the import)
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := os.Remove(p); err != nil {
				return err
			}
			continue
		}
		switch err := unix.Rmdir(p); {
		case err == nil:
		case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST):
			// It holds what the layer put beneath it: an implicit folder now.
			if err := unix.Lremovexattr(p, xattrPlaceholder); err != nil {
				return &os.PathError{Op: "removexattr", Path: p, Err: err}
			}
		default:
			return &os.PathError{Op: "rmdir", Path: p, Err: err}
		}
	}
	return os.Remove(rec)
}

// Export is ExportLayer: the layer a.Path (an imported layer, or a scratch layer whose disk
// holds a container's changes) is written into the folder a.Source, which hcsshim has created,
// in the legacy layout its layer reader walks. The parents are checked, not read: the emulator's
// layers hold their changes, deletions included, as they are.
func (f *Filter) Export(ctx context.Context, a wire.LayerArgs) error {
	layer, err := layerFolder("Path", a.Path)
	if err != nil {
		return err
	}
	out, err := layerFolder("Source", a.Source)
	if err != nil {
		return err
	}
	if _, err := layerParents(a.Parents); err != nil {
		return err
	}
	if err := settlePlaceholders(layer); err != nil {
		return hresult.Errorf(computecore.E_FAIL, "Path: %v", err)
	}
	if entries, err := os.ReadDir(out); err != nil || len(entries) > 0 {
		return hresult.Errorf(hresult.ErrFileExists, "Source: export folder %q is not an empty folder", out)
	}
	root := layer
	// A scratch layer's changes are on its disk: the disk's file system has Files/ (the
	// overlayfs upper folder) as an imported layer has.
	if disk := filepath.Join(layer, ScratchDisk); fileExists(disk) {
		if _, err := ReadVHDX(disk); err != nil {
			return err
		}
		if fileExists(filepath.Join(disk+vhdxFSSuffix, wclayer.FilesDir)) {
			root = disk + vhdxFSSuffix
		}
	}
	pr, pw := io.Pipe()
	exp := make(chan error, 1)
	go func() {
		err := wclayer.New().ExportLayer(ctx, pw, root)
		pw.CloseWithError(err)
		exp <- err
	}()
	werr := tarToLegacy(ctx, pr, out)
	pr.CloseWithError(errConversionEnded)
	eerr := <-exp
	if werr == nil && eerr != nil && !errors.Is(eerr, errConversionEnded) {
		werr = eerr
	}
	if werr == nil {
		werr = systemDelta(out, root != layer)
	}
	if werr != nil {
		// Nothing half made: the folder is left empty, as hcsshim made it.
		if entries, err := os.ReadDir(out); err == nil {
			for _, e := range entries {
				os.RemoveAll(filepath.Join(out, e.Name()))
			}
		}
		return hresult.Errorf(hresultOf(werr), "Path: exporting layer %q: %v", layer, werr)
	}
	log.G(ctx).WithFields(log.Fields{"layer": layer, "folder": out}).Info("hcsemu: layer exported")
	return nil
}

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// tarToLegacy writes the layer tar in r into the folder out in hcsshim's legacy layout.
func tarToLegacy(ctx context.Context, r io.Reader, out string) error {
	tr := tar.NewReader(r)
	var tombstones []string
	type stamp struct {
		p            string
		atime, mtime time.Time
	}
	var dirTimes []stamp
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		rel := strings.TrimSuffix(h.Name, "/")
		if rel == "" || strings.HasPrefix(rel, "/") || strings.Contains("/"+rel+"/", "/../") {
			return badEntry(h.Name, "not a name inside the layer")
		}
		inFiles := strings.HasPrefix(rel, wclayer.FilesDir+"/")
		base := path.Base(rel)
		p := filepath.Join(out, filepath.FromSlash(rel))
		if err := legacyParents(out, path.Dir(rel)); err != nil {
			return err
		}
		switch {
		case base == ".wh..wh..opq":
			// Windows layers have no opaque folders (hcsshim's writer drops the marker too).
			log.G(ctx).WithField("entry", h.Name).Warn("hcsemu: an opaque-folder marker has no legacy form; left out of the export")
			continue
		case strings.HasPrefix(base, ".wh."):
			if !inFiles {
				return notEmulatedEntry(rel, "a deletion outside Files")
			}
			gone := path.Join(path.Dir(rel), strings.TrimPrefix(base, ".wh."))
			tombstones = append(tombstones, `\`+strings.ReplaceAll(strings.TrimPrefix(gone, wclayer.FilesDir+"/"), "/", `\`))
			continue
		}
		atime := h.AccessTime
		if atime.IsZero() {
			atime = h.ModTime
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			if inFiles {
				if err := writeLegacyFile(p+wciDirSuffix, h, nil); err != nil {
					return err
				}
				if err := os.Chtimes(p+wciDirSuffix, atime, h.ModTime); err != nil {
					return err
				}
			}
			dirTimes = append(dirTimes, stamp{p, atime, h.ModTime})
		case tar.TypeReg:
			if inFiles {
				err = writeLegacyFile(p, h, tr)
			} else {
				err = writeRaw(p, tr)
			}
			if err != nil {
				return err
			}
			if err := os.Chtimes(p, atime, h.ModTime); err != nil {
				return err
			}
		case tar.TypeLink:
			if err := os.Link(filepath.Join(out, filepath.FromSlash(h.Linkname)), p); err != nil {
				return err
			}
		case tar.TypeSymlink:
			return notEmulatedEntry(rel, "a reparse point (symbolic link or mount point)")
		default:
			return badEntry(rel, "entry type %q has no legacy form", h.Typeflag)
		}
	}
	var b strings.Builder
	b.WriteString(tombstonesHeader + "\r\n")
	for _, t := range tombstones {
		b.WriteString(t + "\r\n")
	}
	if err := os.WriteFile(filepath.Join(out, "tombstones.txt"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	// Folders last, deepest first: writing into a folder moves its times.
	for i := len(dirTimes) - 1; i >= 0; i-- {
		if err := os.Chtimes(dirTimes[i].p, dirTimes[i].atime, dirTimes[i].mtime); err != nil {
			return err
		}
	}
	return nil
}

// legacyParents makes the folders of rel that the tar did not name (a layer's implicit folders),
// each with a .$wcidirs$ under Files, as hcsshim's reader needs one for every folder there.
func legacyParents(out, rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	p := filepath.Join(out, filepath.FromSlash(rel))
	if fileExists(p) {
		return nil
	}
	if err := legacyParents(out, path.Dir(rel)); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	if strings.HasPrefix(rel, wclayer.FilesDir+"/") {
		h := &tar.Header{Name: rel, PAXRecords: map[string]string{paxFileAttr: strconv.Itoa(attrDirectory)}}
		return writeLegacyFile(p+wciDirSuffix, h, nil)
	}
	return nil
}

// writeLegacyFile writes a file of the legacy layout: the entry's attributes, then its backup
// stream — the security descriptor, then the data (from data, h.Size bytes), as go-winio's
// backuptar orders them.
func writeLegacyFile(p string, h *tar.Header, data io.Reader) error {
	attrs, err := strconv.ParseUint(h.PAXRecords[paxFileAttr], 10, 32)
	if err != nil {
		attrs = attrArchive
		if h.Typeflag == tar.TypeDir {
			attrs = attrDirectory
		}
	}
	file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	var a [4]byte
	binary.LittleEndian.PutUint32(a[:], uint32(attrs))
	if _, err := file.Write(a[:]); err != nil {
		return err
	}
	if v, ok := h.PAXRecords[paxRawSD]; ok {
		sd, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return badEntry(h.Name, "%s is not base64: %v", paxRawSD, err)
		}
		if err := writeBackupStreamHeader(file, backupSecurity, int64(len(sd))); err != nil {
			return err
		}
		if _, err := file.Write(sd); err != nil {
			return err
		}
	}
	if data != nil {
		if err := writeBackupStreamHeader(file, backupData, h.Size); err != nil {
			return err
		}
		if n, err := io.Copy(file, data); err != nil {
			return err
		} else if n != h.Size {
			return badEntry(h.Name, "%d bytes of content, header says %d", n, h.Size)
		}
	}
	return file.Close()
}

func writeRaw(p string, r io.Reader) error {
	file, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := io.Copy(file, r); err != nil {
		return err
	}
	return file.Close()
}

// systemDelta makes sure the export folder out has Hives\System_Delta when it has Files:
// hcsshim's legacy reader takes the times of Files and Hives from it and fails without it
// (legacy.go, Next). Windows layers always carry their registry deltas. A container's scratch
// under the emulator has none, since its containers have no registry: its export gets an empty
// System_Delta (an assumption standing in for the deltas Windows would write; it has the
// folder's times). An imported layer without one is refused, naming what is missing, as
// hcsshim's reader would fail on it.
func systemDelta(out string, scratch bool) error {
	files := filepath.Join(out, wclayer.FilesDir)
	fi, err := os.Stat(files)
	if err != nil {
		return nil // nothing under Files: the reader does not look for the hive
	}
	delta := filepath.Join(out, wclayer.HivesDir, "System_Delta")
	if fileExists(delta) {
		return nil
	}
	if !scratch {
		return badEntry("Hives/System_Delta", "missing from a layer that has Files: Windows layers carry their registry deltas, and hcsshim's layer reader needs this one")
	}
	if err := os.MkdirAll(filepath.Dir(delta), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(delta, nil, 0o644); err != nil {
		return err
	}
	for _, p := range []string{delta, filepath.Dir(delta)} {
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			return err
		}
	}
	return nil
}
