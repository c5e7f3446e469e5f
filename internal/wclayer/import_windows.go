package wclayer

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/Microsoft/go-winio"
	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// On Windows a layer is what Microsoft's layer APIs make of it: files written with the backup
// APIs (BackupWrite keeps security descriptors, attributes, reparse points and times), the
// registry hives processed, and for a base layer the blank scratch VHDX templates made. hcsshim's
// pkg/ociwclayer does all of it from an OCI Windows layer tar, so ImportLayer and ExportLayer
// route there (Layers.importLayer, exportLayer) instead of to the folder-and-xattr
// representation of import_linux.go and export_linux.go, which only the emulator has.

// privileges enables, for the whole process, what the backup APIs need: SeBackupPrivilege
// to read any file (export) and SeRestorePrivilege to write any file with any owner and
// security descriptor (import). containerd's windows differ and snapshotter do the same and
// never disable them again (containerd issue #1681); ociwclayer's documentation leaves
// acquiring them to its caller.
func (l *Layers) privileges() error {
	if err := l.api.EnablePrivileges([]string{winio.SeBackupPrivilege, winio.SeRestorePrivilege}); err != nil {
		return fmt.Errorf("enabling SeBackupPrivilege and SeRestorePrivilege (the process must run as an administrator): %w", err)
	}
	return nil
}

// errImporterDone closes the pipe between the tar checker and ociwclayer once ociwclayer has
// returned, so the checker never blocks on a reader that is gone.
var errImporterDone = errors.New("layer importer returned")

// importWindows is ImportLayer on Windows.
//
// Unlike under the emulator, the layer is written in place rather than beside and renamed:
// importing a base layer makes differencing VHDXs (blank.vhdx over blank-base.vhdx, and
// UtilityVM/SystemTemplate.vhdx over SystemTemplateBase.vhdx: hcsshim's ProcessBaseLayer and
// ProcessUtilityVMImage, see computestorage.SetupContainerBaseLayer) whose parent locators hold
// the absolute path of the folder they were made in, so a layer renamed after import would
// hand out scratch disks with a dangling parent. Instead an existing layer is moved aside
// first and put back if the import fails, and a failed import's folder is destroyed, so on
// error nothing changed. A crash in the middle leaves a partial folder at layer; the
// snapshotter never commits it (Commit follows only a successful Apply) and containerd
// removes the unpack snapshot.
func (l *Layers) importWindows(ctx context.Context, r io.Reader, layer string, parents []string, opts ImportOptions) (_ int64, retErr error) {
	layer = filepath.Clean(layer)
	if err := l.privileges(); err != nil {
		return 0, fmt.Errorf("importing layer %s: %w", layer, err)
	}
	mu, _ := swapLocks.LoadOrStore(layer, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	dir := filepath.Dir(layer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("creating folder for layer %s: %w", layer, err)
	}
	old, err := moveAside(layer)
	if err != nil {
		return 0, err
	}
	defer func() {
		if retErr == nil {
			return
		}
		if err := l.destroyLayer(layer); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.G(ctx).WithError(err).WithField("path", layer).Warn("destroying failed layer import")
		}
		if old != "" {
			if err := os.Rename(old, layer); err != nil {
				log.G(ctx).WithError(err).WithFields(log.Fields{"path": layer, "aside": old}).Error("restoring layer after failed import")
			}
		}
	}()

	// The checker reads the tar, refuses what the emulator's importer refuses, and hands every
	// accepted entry on, re-encoded, through a pipe: ociwclayer never sees a refused header.
	pr, pw := io.Pipe()
	checked := make(chan error, 1)
	go func() {
		err := checkTar(ctx, r, pw)
		pw.CloseWithError(err)
		checked <- err
	}()
	var size int64
	// ociwclayer's base layer writer may open files with ACCESS_SYSTEM_SECURITY, which needs
	// SeSecurityPrivilege when the layer folder is on a VHDX-hosted volume; containerd's
	// windows snapshotter holds it around ImportLayerFromTar for that reason.
	ierr := l.api.RunWithPrivileges([]string{winio.SeSecurityPrivilege}, func() error {
		var err error
		// ociwclayer takes the parents as layerchain.json and containerd's mounts hold them:
		// nearest first, base last.
		size, err = l.api.ImportLayerFromTar(ctx, pr, layer, parents)
		return err
	})
	if ierr != nil {
		// The importer may stop at an entry that is only a symptom (a file under a path it
		// could not create) of a hostile tar whose refused entry comes later: the checker reads
		// on to the end, so that such a tar is refused as one, as on Linux, whatever the
		// importer tripped over first.
		_, _ = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errImporterDone)
	cerr := <-checked
	switch {
	case cerr != nil && !errors.Is(cerr, errImporterDone):
		// A refused entry or a read error: it is why the importer stopped too.
		return 0, fmt.Errorf("importing layer %s: %w", layer, cerr)
	case ierr != nil:
		return 0, fmt.Errorf("importing layer %s with hcsshim's ociwclayer: %w", layer, ierr)
	}
	if len(parents) > 0 {
		if _, err := os.Stat(filepath.Join(layer, LayerChainFile)); errors.Is(err, os.ErrNotExist) {
			if err := WriteLayerChain(layer, parents); err != nil {
				return 0, fmt.Errorf("importing layer %s: %w", layer, err)
			}
		}
	}
	if old != "" {
		if err := l.destroyLayer(old); err != nil {
			log.G(ctx).WithError(err).WithField("path", old).Warn("destroying replaced layer")
		}
	}
	if opts.Sync {
		// The backup APIs write through the file system cache like any writer; Windows has no
		// per-folder syncfs, so this is only as durable as NTFS's own flushing.
		log.G(ctx).WithField("layer", layer).Debug("import sync requested: relying on NTFS flushing")
	}
	log.G(ctx).WithFields(log.Fields{"layer": layer, "bytes": size, "parents": len(parents)}).Debug("imported layer")
	return size, nil
}

// moveAside makes room for a new layer at layer: an empty folder (what a snapshotter's Prepare
// makes for an unpack) is removed, anything else is renamed to a dot-folder beside it, whose
// name it returns.
func moveAside(layer string) (string, error) {
	if _, err := os.Lstat(layer); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("importing layer %s: %w", layer, err)
	}
	if err := os.Remove(layer); err == nil {
		return "", nil
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	old := filepath.Join(filepath.Dir(layer), "."+filepath.Base(layer)+".old-"+hex.EncodeToString(b[:]))
	if err := os.Rename(layer, old); err != nil {
		return "", fmt.Errorf("moving existing layer %s aside: %w", layer, err)
	}
	return old, nil
}

// checkTar copies the tar in r to w entry by entry, refusing every entry the emulator's
// importer refuses (see importer.entry): unsupported types, names that leave the layer or lie
// outside Files/, Hives/ and UtilityVM/, oversized names and PAX records, GNU sparse files,
// symlinks that climb out of their top folder, hard links to anything but an earlier file of
// this tar, and malformed whiteouts. Global PAX headers are dropped, as the emulator skips them.
func checkTar(ctx context.Context, r io.Reader, w io.Writer) error {
	tr := tar.NewReader(bufio.NewReaderSize(r, 64<<10))
	tw := tar.NewWriter(w)
	// fold(name) -> whether the entry is a file a hard link may point to.
	seen := map[string]bool{}
	// fold(name) of the names this tar made something other than a directory (a file, a link,
	// a whiteout): the emulator's importer refuses entries beneath them (importer.ensureDir),
	// and beneath a symlink an entry would be written wherever the link points.
	nondir := map[string]bool{}
	last := ""
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) {
			return fmt.Errorf("malformed tar after entry %q: %w: %w", last, err, errdefs.ErrInvalidArgument)
		}
		if err != nil {
			return fmt.Errorf("reading tar after entry %q: %w", last, err)
		}
		last = hdr.Name
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		key, linkable, err := checkEntry(hdr, seen, nondir)
		if err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
		seen[key] = linkable
		markNonDir(hdr, key, nondir)
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("entry %q: re-encoding header: %w", hdr.Name, err)
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			if _, err := io.Copy(tw, tr); err != nil {
				return fmt.Errorf("entry %q: %w", hdr.Name, err)
			}
		}
	}
	return tw.Close()
}

// checkEntry applies the emulator importer's rules to one header and returns the entry's
// case-folded name and whether a later hard link may target it.
func checkEntry(hdr *tar.Header, seen, nondir map[string]bool) (string, bool, error) {
	switch hdr.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return "", false, invalid("unsupported entry type %q (Windows layers hold files, directories and links)", hdr.Typeflag)
	}
	segs, err := splitTarName(hdr.Name)
	if err != nil {
		return "", false, invalid("%v", err)
	}
	for i := 1; i < len(segs); i++ {
		if p := strings.Join(segs[:i], "/"); nondir[fold(p)] {
			return "", false, invalid("%q is not a directory", p)
		}
	}
	if err := checkPAX(hdr); err != nil {
		return "", false, invalid("%v", err)
	}
	key := fold(strings.Join(segs, "/"))
	base := segs[len(segs)-1]
	if strings.HasPrefix(base, whiteoutPrefix) && hdr.Typeflag != tar.TypeDir {
		if base != whiteoutOpaque {
			target := strings.TrimPrefix(base, whiteoutPrefix)
			if target == "" || target == "." || target == ".." || strings.HasPrefix(target, whiteoutPrefix) {
				return "", false, invalid("whiteout of %q is not a valid name", target)
			}
		}
		return key, false, nil
	}
	if len(segs) == 1 && hdr.Typeflag != tar.TypeDir {
		return "", false, invalid("top folder %q must be a directory", segs[0])
	}
	switch hdr.Typeflag {
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return "", false, invalid("symlink without a target")
		}
		if strings.ContainsRune(hdr.Linkname, 0) || len(hdr.Linkname) > maxPathLen {
			return "", false, invalid("symlink target is not a valid path")
		}
		if symlinkEscapes(segs, hdr.Linkname) {
			return "", false, invalid("symlink target %q leaves the layer", hdr.Linkname)
		}
		return key, false, nil
	case tar.TypeLink:
		tsegs, err := splitTarName(hdr.Linkname)
		if err != nil {
			return "", false, invalid("hard link target %q: %v", hdr.Linkname, err)
		}
		tkey := fold(strings.Join(tsegs, "/"))
		if tkey == key {
			return "", false, invalid("hard link to itself")
		}
		if linkable, ok := seen[tkey]; !ok || !linkable {
			return "", false, invalid("hard link target %q is not an earlier file of this layer", hdr.Linkname)
		}
		return key, true, nil
	case tar.TypeDir:
		return key, false, nil
	default:
		return key, true, nil
	}
}

// markNonDir records in nondir whether the accepted entry hdr (case-folded name key) left a
// non-directory at its name, as the emulator's importer would: a directory entry replaces
// whatever the name held, a whiteout leaves one at the name it deletes (an opaque marker at
// none), any other entry at its own name. Whiteout names are matched case-sensitively, as
// checkEntry and the emulator match them.
func markNonDir(hdr *tar.Header, key string, nondir map[string]bool) {
	segs, err := splitTarName(hdr.Name)
	if err != nil {
		return // checkEntry accepted the name, so this does not happen
	}
	base := segs[len(segs)-1]
	switch {
	case hdr.Typeflag == tar.TypeDir:
		delete(nondir, key)
	case base == whiteoutOpaque:
	case strings.HasPrefix(base, whiteoutPrefix):
		segs[len(segs)-1] = strings.TrimPrefix(base, whiteoutPrefix)
		nondir[fold(strings.Join(segs, "/"))] = true
	default:
		nondir[key] = true
	}
}

// exportWindows is ExportLayer on Windows: ociwclayer reads the layer (a committed layer
// folder, or a scratch layer's VHDX) against the parents its layerchain.json names.
func (l *Layers) exportWindows(ctx context.Context, w io.Writer, layer string) error {
	layer = filepath.Clean(layer)
	if err := l.privileges(); err != nil {
		return fmt.Errorf("exporting layer %s: %w", layer, err)
	}
	// ExportLayerToTar activates the layer itself and its documentation asks that it not be
	// mounted meanwhile.
	if mounted, err := l.isMounted(layer); err != nil {
		return fmt.Errorf("exporting layer %s: %w", layer, err)
	} else if mounted {
		return fmt.Errorf("exporting layer %s: it is mounted (in use by a container): %w", layer, errdefs.ErrFailedPrecondition)
	}
	parents, err := ReadLayerChain(layer)
	if err != nil {
		return fmt.Errorf("exporting layer %s: %w", layer, err)
	}
	if err := l.api.ExportLayerToTar(ctx, w, layer, parents); err != nil {
		return fmt.Errorf("exporting layer %s over %d parents with hcsshim's ociwclayer: %w", layer, len(parents), err)
	}
	return nil
}
