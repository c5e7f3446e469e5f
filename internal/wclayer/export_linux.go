package wclayer

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/containerd/log"
)

// exportFolder is ExportLayer where a layer is a plain folder (the emulator's form).
func exportFolder(ctx context.Context, w io.Writer, layer string) error {
	ex := &exporter{ctx: ctx, root: filepath.Clean(layer), tw: tar.NewWriter(w), links: map[inodeKey]*linkGroup{}}
	for _, top := range exportRoots {
		fi, err := os.Lstat(filepath.Join(ex.root, top))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("exporting layer %s: %w", layer, err)
		}
		if err := ex.walk(top, fi); err != nil {
			return fmt.Errorf("exporting layer %s: %w", layer, err)
		}
	}
	if err := ex.writeLinks(); err != nil {
		return fmt.Errorf("exporting layer %s: %w", layer, err)
	}
	if err := ex.tw.Close(); err != nil {
		return fmt.Errorf("exporting layer %s: %w", layer, err)
	}
	return nil
}

// inodeKey identifies a file across its hard links.
type inodeKey struct{ dev, ino uint64 }

type linkGroup struct {
	paths []string
	fi    fs.FileInfo
	meta  *entryMeta
}

type exporter struct {
	ctx   context.Context
	root  string
	tw    *tar.Writer
	links map[inodeKey]*linkGroup
	order []inodeKey
}

func (ex *exporter) abs(rel string) string { return filepath.Join(ex.root, filepath.FromSlash(rel)) }

// readMeta returns the header stored in attribute attr of the node at p, or nil. Callers check
// with sameName that it belongs to the node: a node copied up by overlayfs carries the
// attribute of the lower file it replaced, which has the same name up to case.
func readMeta(p, attr string) (*entryMeta, error) {
	b, err := getXattr(p, attr)
	if err != nil || b == nil {
		return nil, err
	}
	m, err := decodeMeta(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

func sameName(tarName, rel string) bool {
	segs, err := splitTarName(tarName)
	return err == nil && fold(strings.Join(segs, "/")) == fold(rel)
}

// header gives the header for the node at rel: the stored one if it belongs to rel, else a
// made-up one. Times come from the file system when the node changed since it was imported.
//
// Made-up and changed headers take all three times from the modification time: access times
// move whenever the layer is read (and change times whenever anything about the node does),
// so using them would make two exports of the same layer differ.
func (ex *exporter) header(m *entryMeta, rel string, fi fs.FileInfo, typ byte) *tar.Header {
	mtime := fi.ModTime()
	if m == nil || !sameName(m.Name, rel) {
		return synthHeader(rel, typ, mtime, mtime, mtime)
	}
	h := m.header()
	h.Typeflag = typ
	if m.ModTime != mtime.UnixNano() && typ != tar.TypeLink {
		h.ModTime, h.AccessTime, h.ChangeTime = mtime, mtime, mtime
		h.Format = tar.FormatPAX
	}
	return h
}

func (ex *exporter) write(h *tar.Header, content string) error {
	if err := ex.tw.WriteHeader(h); err != nil {
		return fmt.Errorf("writing header of %q: %w", h.Name, err)
	}
	if content == "" || h.Size == 0 {
		return nil
	}
	f, err := os.Open(content)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.CopyN(ex.tw, f, h.Size); err != nil {
		return fmt.Errorf("writing content of %q: %w", h.Name, err)
	}
	return nil
}

func (ex *exporter) walk(rel string, fi fs.FileInfo) error {
	if err := ex.ctx.Err(); err != nil {
		return err
	}
	p := ex.abs(rel)
	m, err := readMeta(p, xattrHeader)
	if err != nil {
		return err
	}
	mode := fi.Mode()
	switch {
	case isWhiteout(fi):
		want := path.Join(path.Dir(rel), whiteoutPrefix+path.Base(rel))
		var h *tar.Header
		if m != nil && sameName(m.Name, want) {
			h = m.header()
			h.Typeflag = m.Typeflag
		} else {
			h = synthHeader(want, tar.TypeReg, fi.ModTime(), fi.ModTime(), fi.ModTime())
		}
		return ex.write(h, "")
	case mode.IsDir():
		if imp, err := getXattr(p, xattrImplicit); err != nil {
			return err
		} else if imp == nil {
			if err := ex.write(ex.header(m, rel, fi, tar.TypeDir), ""); err != nil {
				return err
			}
		}
		if opq, err := getXattr(p, xattrOverlayOpaque); err != nil {
			return err
		} else if string(opq) == "y" {
			want := path.Join(rel, whiteoutOpaque)
			om, err := readMeta(p, xattrOpaqueHd)
			if err != nil {
				return err
			}
			var h *tar.Header
			if om != nil && sameName(om.Name, want) {
				h = om.header()
				h.Typeflag = om.Typeflag
			} else {
				h = synthHeader(want, tar.TypeReg, fi.ModTime(), fi.ModTime(), fi.ModTime())
			}
			if err := ex.write(h, ""); err != nil {
				return err
			}
		}
		entries, err := os.ReadDir(p) // sorted by name: a deterministic tar
		if err != nil {
			return err
		}
		for _, e := range entries {
			cfi, err := e.Info()
			if err != nil {
				return err
			}
			if err := ex.walk(path.Join(rel, e.Name()), cfi); err != nil {
				return err
			}
		}
		return nil
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		h := ex.header(m, rel, fi, tar.TypeSymlink)
		h.Linkname = target
		return ex.write(h, "")
	case mode.IsRegular():
		if key, nlink := inodeOf(fi); nlink > 1 {
			g := ex.links[key]
			if g == nil {
				g = &linkGroup{fi: fi, meta: m}
				ex.links[key] = g
				ex.order = append(ex.order, key)
			}
			g.paths = append(g.paths, rel)
			return nil
		}
		h := ex.header(m, rel, fi, tar.TypeReg)
		h.Size = fi.Size()
		return ex.write(h, p)
	default:
		// FIFOs, sockets and devices have no Windows equivalent; a container under the
		// emulator can make them in its scratch layer, and they are left out.
		log.G(ex.ctx).WithField("path", p).Warnf("not exporting %s node", mode.Type())
		return nil
	}
}

// writeLinks writes hard-linked files after everything else: first the entry that was the
// file when imported (else the first name), then the others as links to it.
func (ex *exporter) writeLinks() error {
	for _, key := range ex.order {
		g := ex.links[key]
		primary := g.paths[0]
		if g.meta != nil && g.meta.Primary != "" {
			for _, p := range g.paths {
				if p == g.meta.Primary {
					primary = p
				}
			}
		}
		h := ex.header(g.meta, primary, g.fi, tar.TypeReg)
		h.Size = g.fi.Size()
		if err := ex.write(h, ex.abs(primary)); err != nil {
			return err
		}
		others := make([]string, 0, len(g.paths)-1)
		for _, p := range g.paths {
			if p != primary {
				others = append(others, p)
			}
		}
		sort.Strings(others)
		for _, p := range others {
			var lm *entryMeta
			if g.meta != nil {
				lm = g.meta.Links[p]
			}
			lh := ex.header(lm, p, g.fi, tar.TypeLink)
			lh.Linkname = h.Name
			if lm != nil && lm.Linkname != "" && sameName(lm.Linkname, primary) {
				lh.Linkname = lm.Linkname
			}
			lh.Size = 0
			if err := ex.write(lh, ""); err != nil {
				return err
			}
		}
	}
	return nil
}
