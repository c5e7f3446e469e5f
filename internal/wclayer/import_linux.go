package wclayer

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
)

// importFolder is ImportLayer where a layer is a plain folder (the emulator's form, see the
// package doc).
func importFolder(ctx context.Context, r io.Reader, layer string, parents []string, opts ImportOptions) (int64, error) {
	layer = filepath.Clean(layer)
	dir := filepath.Dir(layer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, fmt.Errorf("creating folder for layer %s: %w", layer, err)
	}
	tmp, err := os.MkdirTemp(dir, "."+filepath.Base(layer)+".import-")
	if err != nil {
		return 0, fmt.Errorf("creating import folder for layer %s: %w", layer, err)
	}
	done := false
	defer func() {
		if !done {
			if err := os.RemoveAll(tmp); err != nil {
				log.G(ctx).WithError(err).WithField("path", tmp).Warn("removing failed layer import")
			}
		}
	}()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return 0, err
	}

	im := newImporter(tmp, parents)
	if _, err := im.ensureDir([]string{FilesDir}); err != nil {
		return 0, err
	}
	// archive/tar reads headers 512 bytes at a time; buffer them. Reads of at least the
	// buffer's size (file content) bypass it. 64 KiB chunks (here and in im.buf) keep the data
	// in the CPU cache between read(2) and write(2): with 1 MiB chunks import ran at half the
	// speed, measured with hack/bench-import.sh.
	tr := tar.NewReader(bufio.NewReaderSize(r, 64<<10))
	for {
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("importing layer %s: %w", layer, err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, tar.ErrHeader) || errors.Is(err, tar.ErrFieldTooLong) {
			return 0, fmt.Errorf("importing layer %s: malformed tar after entry %q: %w: %w", layer, im.last, err, errdefs.ErrInvalidArgument)
		}
		if err != nil {
			return 0, fmt.Errorf("importing layer %s: reading tar after entry %q: %w", layer, im.last, err)
		}
		im.last = hdr.Name
		if err := im.entry(hdr, tr); err != nil {
			return 0, fmt.Errorf("importing layer %s: entry %q: %w", layer, hdr.Name, err)
		}
	}
	if err := im.finish(); err != nil {
		return 0, fmt.Errorf("importing layer %s: %w", layer, err)
	}
	if len(parents) > 0 {
		if err := WriteLayerChain(tmp, parents); err != nil {
			return 0, err
		}
	}
	if opts.Sync {
		if err := syncFS(tmp); err != nil {
			return 0, fmt.Errorf("importing layer %s: %w", layer, err)
		}
	}
	if err := replaceDir(tmp, layer); err != nil {
		return 0, err
	}
	done = true
	log.G(ctx).WithFields(log.Fields{"layer": layer, "bytes": im.size, "entries": im.count}).Debug("imported layer")
	return im.size, nil
}

// replaceDir renames tmp to dst, moving an existing dst aside first and removing it after.
func replaceDir(tmp, dst string) error {
	mu, _ := swapLocks.LoadOrStore(dst, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()

	old := ""
	if _, err := os.Lstat(dst); err == nil {
		old = tmp + ".old"
		if err := os.Rename(dst, old); err != nil {
			return fmt.Errorf("moving old layer %s aside: %w", dst, err)
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		return fmt.Errorf("renaming imported layer into %s: %w", dst, err)
	}
	if old != "" {
		return os.RemoveAll(old)
	}
	return nil
}

// node is what the importer knows of a name it wrote.
type node struct {
	rel      string // folder-relative, slash-separated, as on disk
	dir      bool
	whiteout bool
}

type dirTimes struct{ atime, mtime time.Time }

type importer struct {
	root    string
	parents []string
	nodes   map[string]node                // fold(rel) -> node
	pdirs   []map[string]map[string]string // per parent: dir rel -> fold(name) -> name
	times   map[string]dirTimes            // dir rel -> times to set at the end
	buf     []byte
	size    int64
	count   int
	last    string
}

func newImporter(root string, parents []string) *importer {
	return &importer{
		root: root, parents: parents,
		nodes: map[string]node{}, pdirs: make([]map[string]map[string]string, len(parents)),
		times: map[string]dirTimes{}, buf: make([]byte, 64<<10),
	}
}

func (im *importer) abs(rel string) string { return filepath.Join(im.root, filepath.FromSlash(rel)) }

// childName resolves name inside the on-disk folder dirRel: the spelling already written in
// this layer, else the nearest parent's spelling, else name itself.
func (im *importer) childName(dirRel, name string) (string, *node) {
	rel := path.Join(dirRel, name)
	if n, ok := im.nodes[fold(rel)]; ok {
		return path.Base(n.rel), &n
	}
	key := fold(name)
	for i, p := range im.parents {
		if im.pdirs[i] == nil {
			im.pdirs[i] = map[string]map[string]string{}
		}
		m, ok := im.pdirs[i][dirRel]
		if !ok {
			m = map[string]string{}
			if f, err := os.Open(filepath.Join(p, filepath.FromSlash(dirRel))); err == nil {
				names, _ := f.Readdirnames(-1)
				f.Close()
				for _, n := range names {
					m[fold(n)] = n
				}
			}
			im.pdirs[i][dirRel] = m
		}
		if n, ok := m[key]; ok {
			return n, nil
		}
	}
	return name, nil
}

// ensureDir makes sure the folders segs exist in the layer, creating missing ones as
// implicit, and returns the on-disk relative path.
func (im *importer) ensureDir(segs []string) (string, error) {
	rel := ""
	for _, s := range segs {
		name, n := im.childName(rel, s)
		rel = path.Join(rel, name)
		if n != nil {
			if !n.dir {
				return "", invalid("%q is not a directory", n.rel)
			}
			continue
		}
		p := im.abs(rel)
		if err := os.Mkdir(p, 0o755); err != nil {
			return "", err
		}
		if err := setXattr(p, xattrImplicit, []byte("1")); err != nil {
			return "", err
		}
		im.nodes[fold(rel)] = node{rel: rel, dir: true}
	}
	return rel, nil
}

// remove deletes a node written earlier in this layer (a later entry wins).
func (im *importer) remove(rel string) error {
	key := fold(rel)
	n, ok := im.nodes[key]
	if !ok {
		return nil
	}
	if err := os.RemoveAll(im.abs(n.rel)); err != nil {
		return err
	}
	delete(im.nodes, key)
	delete(im.times, n.rel)
	if n.dir {
		prefix := key + "/"
		for k, c := range im.nodes {
			if strings.HasPrefix(k, prefix) {
				delete(im.nodes, k)
				delete(im.times, c.rel)
			}
		}
	}
	return nil
}

func (im *importer) setMeta(p string, m *entryMeta, attr string) error {
	b, err := m.encode()
	if err != nil {
		return err
	}
	return setXattr(p, attr, b)
}

func (im *importer) entry(hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		// Global PAX headers carry no file; archive/tar hands them over as entries.
		return nil
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
	default:
		return invalid("unsupported entry type %q (Windows layers hold files, directories and links)", hdr.Typeflag)
	}
	segs, err := splitTarName(hdr.Name)
	if err != nil {
		return invalid("%v", err)
	}
	if err := checkPAX(hdr); err != nil {
		return invalid("%v", err)
	}
	im.count++
	base := segs[len(segs)-1]
	if strings.HasPrefix(base, whiteoutPrefix) && hdr.Typeflag != tar.TypeDir {
		return im.whiteout(hdr, segs)
	}
	if len(segs) == 1 && hdr.Typeflag != tar.TypeDir {
		return invalid("top folder %q must be a directory", segs[0])
	}
	dirRel, err := im.ensureDir(segs[:len(segs)-1])
	if err != nil {
		return err
	}
	name, existing := im.childName(dirRel, base)
	rel := path.Join(dirRel, name)
	p := im.abs(rel)
	m := metaFromHeader(hdr)

	if hdr.Typeflag == tar.TypeDir {
		if existing != nil && existing.dir {
			// A directory entry for a directory already written updates its metadata and keeps
			// its contents, as extracting over an existing directory does.
			if err := removeXattr(p, xattrImplicit); err != nil {
				return err
			}
		} else {
			if err := im.remove(rel); err != nil {
				return err
			}
			if err := os.Mkdir(p, 0o755); err != nil {
				return err
			}
			im.nodes[fold(rel)] = node{rel: rel, dir: true}
		}
		im.times[rel] = dirTimes{hdr.AccessTime, hdr.ModTime}
		return im.setMeta(p, m, xattrHeader)
	}

	if err := im.remove(rel); err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeReg:
		b, err := m.encode()
		if err != nil {
			return err
		}
		n, err := writeRegular(p, r, im.buf, xattrHeader, b, hdr.AccessTime, hdr.ModTime)
		if err != nil {
			return fmt.Errorf("writing %s: %w", rel, err)
		}
		im.size += n
		im.nodes[fold(rel)] = node{rel: rel}
		return nil
	case tar.TypeSymlink:
		if hdr.Linkname == "" {
			return invalid("symlink without a target")
		}
		if strings.ContainsRune(hdr.Linkname, 0) || len(hdr.Linkname) > maxPathLen {
			return invalid("symlink target is not a valid path")
		}
		if symlinkEscapes(segs, hdr.Linkname) {
			return invalid("symlink target %q leaves the layer", hdr.Linkname)
		}
		if err := os.Symlink(hdr.Linkname, p); err != nil {
			return err
		}
	case tar.TypeLink:
		return im.hardlink(hdr, rel, m)
	}
	im.nodes[fold(rel)] = node{rel: rel}
	if err := im.setMeta(p, m, xattrHeader); err != nil {
		return err
	}
	return setTimes(p, hdr.AccessTime, hdr.ModTime)
}

func (im *importer) hardlink(hdr *tar.Header, rel string, m *entryMeta) error {
	tsegs, err := splitTarName(hdr.Linkname)
	if err != nil {
		return invalid("hard link target %q: %v", hdr.Linkname, err)
	}
	// The target must be an earlier entry of this very layer: resolve it among the nodes
	// written so far, never on disk.
	trel := ""
	var tn *node
	for _, s := range tsegs {
		n, ok := im.nodes[fold(path.Join(trel, s))]
		if !ok {
			return invalid("hard link target %q is not an earlier entry of this layer", hdr.Linkname)
		}
		trel, tn = n.rel, &n
	}
	if tn.dir {
		return invalid("hard link target %q is a directory", hdr.Linkname)
	}
	if tn.whiteout {
		return invalid("hard link target %q is a whiteout", hdr.Linkname)
	}
	if fold(trel) == fold(rel) {
		return invalid("hard link to itself")
	}
	tp := im.abs(trel)
	if err := os.Link(tp, im.abs(rel)); err != nil {
		return err
	}
	im.nodes[fold(rel)] = node{rel: rel}
	b, err := getXattr(tp, xattrHeader)
	if err != nil {
		return err
	}
	tm := &entryMeta{}
	if b != nil {
		if tm, err = decodeMeta(b); err != nil {
			return err
		}
	}
	if tm.Primary == "" {
		tm.Primary = trel
	}
	if tm.Links == nil {
		tm.Links = map[string]*entryMeta{}
	}
	// The target as the tar spelled it, which may differ in case from the primary's name.
	m.Linkname = hdr.Linkname
	tm.Links[rel] = m
	return im.setMeta(tp, tm, xattrHeader)
}

func (im *importer) whiteout(hdr *tar.Header, segs []string) error {
	base := segs[len(segs)-1]
	dirRel, err := im.ensureDir(segs[:len(segs)-1])
	if err != nil {
		return err
	}
	m := metaFromHeader(hdr)
	if base == whiteoutOpaque {
		p := im.abs(dirRel)
		if err := setXattr(p, xattrOverlayOpaque, []byte("y")); err != nil {
			return err
		}
		return im.setMeta(p, m, xattrOpaqueHd)
	}
	target := strings.TrimPrefix(base, whiteoutPrefix)
	if target == "" || target == "." || target == ".." || strings.HasPrefix(target, whiteoutPrefix) {
		return invalid("whiteout of %q is not a valid name", target)
	}
	name, _ := im.childName(dirRel, target)
	rel := path.Join(dirRel, name)
	if err := im.remove(rel); err != nil {
		return err
	}
	p := im.abs(rel)
	if err := mknodWhiteout(p); err != nil {
		return err
	}
	im.nodes[fold(rel)] = node{rel: rel, whiteout: true}
	return im.setMeta(p, m, xattrHeader)
}

// finish sets directory times, which writing their children changed.
func (im *importer) finish() error {
	for rel, t := range im.times {
		if err := setTimes(im.abs(rel), t.atime, t.mtime); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
