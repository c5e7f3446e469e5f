//go:build linux

package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/openhcs/runhcs/test/image"
)

// Images the registry holds from the start, by repository path (any registry name resolves to
// the node's registry, so registry.k8s.io/pause:3.10.2 is pause:3.10.2 there).
var (
	// TestImage is the default test image (test/image.Default).
	TestImage = "runhcs/test:latest"
	// PauseImage is containerd 2.4's default sandbox image's path: its Cmd waits, and it has
	// wincat.exe as Kubernetes' Windows pause image has.
	PauseImage = "pause:3.10.2"
	// UserImage is TestImage with ContainerUser as its default user (image config User), as
	// nanoserver's is.
	UserImage = "runhcs/test-containeruser:latest"
	// OtherBuildImage is TestImage of Windows Server 2019 (10.0.17763.1, another build than the
	// node's 20348) that says so (os.version); UndeclaredBuildImage is the same image without
	// os.version (in neither its config nor the index), as images some tools build are: the
	// process-isolation build rule (test/cri TestImageBuildRule).
	OtherBuildImage      = "runhcs/test-ltsc2019:latest"
	UndeclaredBuildImage = "runhcs/test-ltsc2019-undeclared:latest"
	// HostProcessImage is TestImage with the Windows build of its workload. The other images
	// carry the Linux build, since hcsemu runs a container's processes as Linux processes; a
	// HostProcess container's processes run on the host, under the node's Wine, which starts
	// Windows executables only, as Windows does.
	HostProcessImage = "runhcs/test-windows:latest"
)

// otherBuild is OtherBuildImage's Windows build.
const otherBuild = "10.0.17763.1"

// startRegistry serves go-containerregistry's registry (it accepts pushes) on a loopback port of
// the emulated host's namespace and pushes the test images into it.
func (n *node) startRegistry(ctx context.Context) (string, error) {
	l, err := n.listenInHost("127.0.0.1:0")
	if err != nil {
		return "", err
	}
	logf, err := os.Create(n.path("logs", "registry.log"))
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(logf, "", log.LstdFlags)))}
	go srv.Serve(l)
	addr := l.Addr().String()
	workload, err := os.ReadFile(filepath.Join(n.bin, "workload"))
	if err != nil {
		return "", err
	}
	test := image.Default(workload)
	wincat, err := os.ReadFile(filepath.Join(n.bin, "wincat"))
	if err != nil {
		return "", err
	}
	pause := image.Default(workload)
	pause.Cmd = []string{image.WorkloadPath, "sleep", "31536000"} // a year: until the pod stops
	// Where Kubernetes' Windows pause image has wincat.exe, which containerd 1.7 runs in the
	// sandbox container for PortForward (test/wincat, a stand-in).
	pause.Layers[0].Entries = append(pause.Layers[0].Entries, image.Entry{Path: "Files/Windows/System32/wincat.exe", Data: wincat})
	user := image.Default(workload)
	user.User = "ContainerUser"
	other := image.Default(workload)
	other.OSVersion = otherBuild
	other.Layers = []image.Layer{image.BaseLayer(workload, image.BaseOptions{UtilityVM: true, OSVersion: otherBuild})}
	undeclared := image.Default(workload)
	undeclared.OSVersion = ""
	undeclared.Layers = other.Layers
	workloadPE, err := os.ReadFile(filepath.Join(n.bin, "workload.exe"))
	if err != nil {
		return "", err
	}
	hostProcess := image.Default(workloadPE)
	// The push dials in the host namespace, as every client of the registry does.
	tr := hostTransport(n.root)
	for repo, img := range map[string]*image.Image{TestImage: test, PauseImage: pause, UserImage: user, OtherBuildImage: other, UndeclaredBuildImage: undeclared, HostProcessImage: hostProcess} {
		// OtherBuildImage is an index, as Microsoft publishes its images: its manifest's
		// descriptor carries the platform containerd matches at pull time.
		if err := push(ctx, tr, addr+"/"+repo, img, repo == OtherBuildImage); err != nil {
			return "", fmt.Errorf("push %s: %w", repo, err)
		}
	}
	return addr, nil
}

// push uploads img (the OCI archive test/image writes) to ref, REGISTRY/REPO:TAG, with the
// distribution API's monolithic blob upload and a manifest PUT; with asIndex the tag names an
// image index of that one manifest, with its platform.
func push(ctx context.Context, tr http.RoundTripper, ref string, img *image.Image, asIndex bool) error {
	var buf bytes.Buffer
	if err := img.WriteOCI(&buf); err != nil {
		return err
	}
	files := map[string][]byte{}
	t := tar.NewReader(&buf)
	for {
		h, err := t.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if h.Typeflag == tar.TypeReg {
			if files[h.Name], err = io.ReadAll(t); err != nil {
				return err
			}
		}
	}
	blob := func(d digest.Digest) ([]byte, error) {
		b, ok := files["blobs/"+d.Algorithm().String()+"/"+d.Encoded()]
		if !ok {
			return nil, fmt.Errorf("blob %s not in the archive", d)
		}
		return b, nil
	}
	var index ocispec.Index
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return fmt.Errorf("index.json: want one manifest: %v", err)
	}
	mdesc := index.Manifests[0]
	mb, err := blob(mdesc.Digest)
	if err != nil {
		return err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return err
	}
	host, rest, _ := strings.Cut(ref, "/")
	repo, tag, _ := strings.Cut(rest, ":")
	c := &http.Client{Transport: tr}
	do := func(method, url, ctype string, body []byte, want int) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		msg, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			return nil, fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, msg)
		}
		return resp, nil
	}
	for _, d := range append([]ocispec.Descriptor{m.Config}, m.Layers...) {
		b, err := blob(d.Digest)
		if err != nil {
			return err
		}
		resp, err := do(http.MethodPost, "http://"+host+"/v2/"+repo+"/blobs/uploads/", "", nil, http.StatusAccepted)
		if err != nil {
			return err
		}
		loc, err := resp.Location()
		if err != nil {
			return err
		}
		q := loc.Query()
		q.Set("digest", d.Digest.String())
		loc.RawQuery = q.Encode()
		if _, err := do(http.MethodPut, loc.String(), "application/octet-stream", b, http.StatusCreated); err != nil {
			return err
		}
	}
	if !asIndex {
		_, err = do(http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/"+tag, mdesc.MediaType, mb, http.StatusCreated)
		return err
	}
	if _, err := do(http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/"+mdesc.Digest.String(), mdesc.MediaType, mb, http.StatusCreated); err != nil {
		return err
	}
	if mdesc.Platform == nil {
		return fmt.Errorf("index.json: the manifest has no platform")
	}
	ib, err := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{MediaType: mdesc.MediaType, Digest: mdesc.Digest, Size: mdesc.Size, Platform: mdesc.Platform}}})
	if err != nil {
		return err
	}
	_, err = do(http.MethodPut, "http://"+host+"/v2/"+repo+"/manifests/"+tag, ocispec.MediaTypeImageIndex, ib, http.StatusCreated)
	return err
}
