package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// Annotations that name an imported image. containerd's importers (core/transfer/image and
// images/archive in 2.x, import.go in 1.7) take the full name from AnnotationImageName and fall
// back to the OCI ref name.
const (
	AnnotationImageName = "io.containerd.image.name"
	AnnotationRefName   = ocispec.AnnotationRefName
)

// Defaults of the standard test image. The OS version is Windows Server 2022's build, which
// hcsemu reports as its host version unless told otherwise.
const (
	DefaultName      = "docker.io/runhcs/test:latest"
	DefaultOSVersion = "10.0.20348.1"
	// DefaultOutput is what the default command prints.
	DefaultOutput = "hello from a windows container"
	// WorkloadPath is where the workload is in the container, as Windows sees it.
	WorkloadPath = `C:\workload\workload.exe`
)

// Image is one single-platform Windows image.
type Image struct {
	// Name is the full reference the import gives the image, e.g. "docker.io/runhcs/test:latest".
	Name string
	// OSVersion is the config's os.version (and the index platform's), e.g. "10.0.20348.1".
	OSVersion    string
	Architecture string // "amd64" when empty
	Env          []string
	Entrypoint   []string
	Cmd          []string
	WorkingDir   string
	User         string
	// Layers, base first.
	Layers []Layer
	// Created is the image creation time; a fixed time keeps output reproducible.
	Created time.Time
}

// Layer is one layer tar.
type Layer struct {
	Entries []Entry
	// Uncompressed writes application/vnd.oci.image.layer.v1.tar instead of …tar+gzip.
	Uncompressed bool
	// Comment goes into the config history, to tell layers apart when debugging.
	Comment string
}

// Entry is one tar entry of a Windows layer.
type Entry struct {
	// Path inside the layer, with forward slashes: "Files/…", "Hives/…" or "UtilityVM/…".
	// Folders above it are added automatically.
	Path string
	// Dir makes a folder; Data is ignored.
	Dir  bool
	Data []byte
	// Whiteout marks Path as deleted: the tar gets ".wh.<base name>" in Path's folder.
	Whiteout bool
	// Link makes Path a hard link to the file at Link, another entry's Path in this layer (as
	// Windows base layers link one file under several names). Data is ignored.
	Link string
	// Attributes are the FILE_ATTRIBUTE_* flags; 0 means ARCHIVE for files, DIRECTORY for folders.
	Attributes uint32
	// Mode is the tar mode; 0 means 0o755 for folders and executables ("*.exe"), 0o644 otherwise.
	Mode int64
}

// FILE_ATTRIBUTE_* values (winnt.h) used for entries.
const (
	FileAttributeReadonly  = 0x00000001
	FileAttributeHidden    = 0x00000002
	FileAttributeSystem    = 0x00000004
	FileAttributeDirectory = 0x00000010
	FileAttributeArchive   = 0x00000020
)

// ociArchive is what WriteOCI produces: every blob plus the layout files.
type ociArchive struct {
	blobs map[digest.Digest][]byte
	order []digest.Digest
}

func (a *ociArchive) add(b []byte) ocispec.Descriptor {
	d := digest.FromBytes(b)
	if _, ok := a.blobs[d]; !ok {
		a.blobs[d] = b
		a.order = append(a.order, d)
	}
	return ocispec.Descriptor{Digest: d, Size: int64(len(b))}
}

// WriteOCI writes img as an OCI image layout tarball to w.
func (img *Image) WriteOCI(w io.Writer) error {
	if img.Name == "" {
		return fmt.Errorf("image has no name: set Image.Name, e.g. %q", DefaultName)
	}
	if len(img.Layers) == 0 {
		return fmt.Errorf("image %s has no layers", img.Name)
	}
	arch := img.Architecture
	if arch == "" {
		arch = "amd64"
	}
	created := img.Created
	if created.IsZero() {
		created = fixedTime
	}
	a := &ociArchive{blobs: map[digest.Digest][]byte{}}

	var (
		layerDescs []ocispec.Descriptor
		diffIDs    []digest.Digest
		history    []ocispec.History
	)
	for i, l := range img.Layers {
		raw, err := l.tar(created)
		if err != nil {
			return fmt.Errorf("image %s layer %d: %w", img.Name, i, err)
		}
		diffIDs = append(diffIDs, digest.FromBytes(raw))
		blob, mediaType := raw, ocispec.MediaTypeImageLayer
		if !l.Uncompressed {
			if blob, err = gzipBytes(raw); err != nil {
				return fmt.Errorf("image %s layer %d: %w", img.Name, i, err)
			}
			mediaType = ocispec.MediaTypeImageLayerGzip
		}
		d := a.add(blob)
		d.MediaType = mediaType
		layerDescs = append(layerDescs, d)
		history = append(history, ocispec.History{Created: &created, CreatedBy: "runhcs test/image", Comment: l.Comment})
	}

	platform := ocispec.Platform{OS: "windows", Architecture: arch, OSVersion: img.OSVersion}
	config := ocispec.Image{
		Created:  &created,
		Platform: platform,
		Config: ocispec.ImageConfig{
			Env:        img.Env,
			Entrypoint: img.Entrypoint,
			Cmd:        img.Cmd,
			WorkingDir: img.WorkingDir,
			User:       img.User,
		},
		RootFS:  ocispec.RootFS{Type: "layers", DiffIDs: diffIDs},
		History: history,
	}
	configJSON, err := json.Marshal(config)
	if err != nil {
		return err
	}
	configDesc := a.add(configJSON)
	configDesc.MediaType = ocispec.MediaTypeImageConfig

	manifest := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    configDesc,
		Layers:    layerDescs,
	}
	manifestJSON, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	manifestDesc := a.add(manifestJSON)
	manifestDesc.MediaType = ocispec.MediaTypeImageManifest
	manifestDesc.Platform = &platform
	manifestDesc.Annotations = map[string]string{
		AnnotationImageName: img.Name,
		AnnotationRefName:   refName(img.Name),
	}

	index := ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manifestDesc},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return err
	}
	layoutJSON, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return err
	}

	tw := tar.NewWriter(w)
	put := func(name string, b []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: created, Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := put(ocispec.ImageLayoutFile, layoutJSON); err != nil {
		return err
	}
	if err := put(ocispec.ImageIndexFile, indexJSON); err != nil {
		return err
	}
	for _, d := range a.order {
		if err := put("blobs/"+d.Algorithm().String()+"/"+d.Encoded(), a.blobs[d]); err != nil {
			return err
		}
	}
	return tw.Close()
}

// WriteFile writes img as an OCI image tarball at path (atomically: a temporary file renamed).
func (img *Image) WriteFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".image-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := img.WriteOCI(f); err != nil {
		f.Close()
		return fmt.Errorf("write image %s to %s: %w", img.Name, path, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// refName is the tag part of a reference ("latest" of "docker.io/x/y:latest"), what containerd's
// exporter puts in org.opencontainers.image.ref.name.
func refName(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		switch name[i] {
		case ':':
			return name[i+1:]
		case '/', '@':
			return name
		}
	}
	return name
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fixedTime makes images reproducible: the same inputs give the same digests.
var fixedTime = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
