package compute

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openhcs/runhcs/internal/computecore"
	"github.com/openhcs/runhcs/internal/emuvhdx"
	"github.com/openhcs/runhcs/internal/hcs/schema2"
	"github.com/openhcs/runhcs/internal/hcsemu/hresult"
	"github.com/openhcs/runhcs/internal/hcsemu/layout"
	"github.com/openhcs/runhcs/internal/hcsemu/storage"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// layerCall sends a storage request over TCP (as the stand-in vmcompute.dll does) and fails the
// test unless its HRESULT is want; it returns the response.
func layerCall(t *testing.T, c *tcpClient, want computecore.HRESULT, method string, args any) *wire.Frame {
	t.Helper()
	f := c.call(method, args)
	if computecore.HRESULT(f.HResult) != want {
		t.Fatalf("%s(%+v): hresult %#x (%s), want %#x", method, args, f.HResult, f.Result, uint32(want))
	}
	return f
}

func mountPath(t *testing.T, c *tcpClient, args wire.LayerArgs) wire.LayerMountReply {
	t.Helper()
	var r wire.LayerMountReply
	if err := layerCall(t, c, 0, wire.MethodGetLayerMountPath, args).DecodeReply(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

// baseLayer makes a processed base layer whose Files/ is a container volume with the workload
// (newVolume), and a second layer over it with one file.
func baseLayers(t *testing.T, c *tcpClient) (base, mid string) {
	t.Helper()
	dir := t.TempDir()
	base, mid = filepath.Join(dir, "base"), filepath.Join(dir, "mid")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(newVolume(t), filepath.Join(base, "Files")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(mid, "Files", "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mid, "Files", "data", "mid.txt"), []byte("from mid"), 0o644); err != nil {
		t.Fatal(err)
	}
	layerCall(t, c, 0, wire.MethodProcessBaseImage, wire.LayerArgs{Path: base})
	return base, mid
}

// TestStorageFilter drives the storage filter as the stand-in vmcompute.dll does, in the order
// hcsshim and containerd mount a container's layers, and runs a container on the volume it
// names.
func TestStorageFilter(t *testing.T) {
	d := startDaemon(t)
	c := dialTCP(t, d.tcpAddr)
	base, mid := baseLayers(t, c)
	for _, n := range []string{"blank.vhdx", "blank-base.vhdx"} {
		if _, err := os.Stat(filepath.Join(base, n)); err != nil {
			t.Fatalf("ProcessBaseImage made no %s: %v", n, err)
		}
	}
	parents := []string{mid, base}
	scratch := filepath.Join(t.TempDir(), "scratch")
	layerCall(t, c, 0, wire.MethodCreateSandboxLayer, wire.LayerArgs{Path: scratch, Parents: parents})
	if b, err := os.ReadFile(filepath.Join(scratch, "layerchain.json")); err != nil || !strings.Contains(string(b), mid) {
		t.Errorf("layerchain.json: %s, %v", b, err)
	}
	layerCall(t, c, hresult.ErrFileExists, wire.MethodCreateSandboxLayer, wire.LayerArgs{Path: scratch, Parents: parents})
	layerCall(t, c, 0, wire.MethodExpandSandboxSize, wire.LayerArgs{Path: scratch, Size: 30 << 30})
	layerCall(t, c, computecore.E_INVALIDARG, wire.MethodExpandSandboxSize, wire.LayerArgs{Path: scratch, Size: 1 << 20})

	// Not activated: no mount path, no prepare.
	layerCall(t, c, hresult.ErrNotFound, wire.MethodGetLayerMountPath, wire.LayerArgs{Path: scratch})
	layerCall(t, c, hresult.ErrNotFound, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: parents})

	layerCall(t, c, 0, wire.MethodActivateLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, hresult.ErrInvalidState, wire.MethodActivateLayer, wire.LayerArgs{Path: scratch})
	f := layerCall(t, c, computecore.E_PATH_NOT_FOUND, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: []string{mid, "/nonexistent/layer"}})
	if !strings.Contains(f.Result, "Parents[1]") || !strings.Contains(f.Result, "/nonexistent/layer") {
		t.Errorf("PrepareLayer with a missing parent: %s; want it to name Parents[1] and the path", f.Result)
	}
	dosdevices := filepath.Join(t.TempDir(), "dosdevices")
	if err := os.Mkdir(dosdevices, 0o755); err != nil {
		t.Fatal(err)
	}
	layerCall(t, c, computecore.E_INVALIDARG, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: parents, DosDevices: "/tmp"})
	layerCall(t, c, 0, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: parents, DosDevices: dosdevices})
	layerCall(t, c, hresult.ErrInvalidState, wire.MethodDeactivateLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, hresult.ErrBusy, wire.MethodDestroyLayer, wire.LayerArgs{Path: scratch})

	mp := mountPath(t, c, wire.LayerArgs{Path: scratch})
	guid, ok := storage.VolumeGUID(mp.Path)
	if !mp.Volume || !ok || !strings.HasSuffix(mp.Path, `}\`) {
		t.Fatalf("GetLayerMountPath = %+v, want a volume path \\\\?\\Volume{GUID}\\", mp)
	}
	// The volume merges the layers, and Wine's dosdevices link reaches it.
	for _, p := range []string{filepath.Join(dosdevices, "volume{"+guid+"}", "data", "mid.txt")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "from mid" {
			t.Errorf("reading %s through the volume: %q, %v", p, b, err)
		}
	}

	// A container on that volume, as the shim names it: Storage.Path is the volume path.
	api := dial(t, d)
	op, _ := api.CreateOperation(0, nil)
	cs, err := api.CreateComputeSystem("on-volume", containerConfig(strings.ReplaceAll(mp.Path, `\`, `\\`), ""), op, 0)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err := api.WaitForOperationResult(op, opTimeout); err != nil {
		t.Fatalf("create on %s: %v (%s)", mp.Path, err, doc)
	}
	api.CloseOperation(op)
	mustRun(t, api, "start", func(op computecore.Operation) error { return api.StartComputeSystem(cs, op, "") })
	s := mustStart(t, api, cs, schema2.ProcessParameters{CommandLine: prog + ` write C:\data\new.txt written`, CreateStdOutPipe: true, CreateStdErrPipe: true})
	out, errOut := readAll(t, s.stdout), readAll(t, s.stderr)
	if code := s.exitCode(t); code != 0 {
		t.Fatalf("workload write: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The container stopped with its last process.
	run(t, api, func(op computecore.Operation) error { return api.TerminateComputeSystem(cs, op, "") })
	api.CloseComputeSystem(cs)
	// The write went to the scratch disk, not into a parent.
	if b, err := os.ReadFile(filepath.Join(scratch, storage.ScratchDisk+emuvhdx.FSSuffix, "Files", "data", "new.txt")); err != nil || string(b) != "written" {
		t.Errorf("the container's write on the scratch disk: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(mid, "Files", "data", "new.txt")); err == nil {
		t.Errorf("the container's write reached a parent layer")
	}

	// An unknown volume is refused by HCS naming the field.
	op, _ = api.CreateOperation(0, nil)
	var doc string
	_, err = api.CreateComputeSystem("no-volume", containerConfig(`\\\\?\\Volume{00000000-0000-0000-0000-000000000001}\\`, ""), op, 0)
	if err == nil {
		doc, err = api.WaitForOperationResult(op, opTimeout)
	}
	api.CloseOperation(op)
	if !errors.Is(err, computecore.E_PATH_NOT_FOUND) || !strings.Contains(doc, "Container.Storage.Path") {
		t.Errorf("a container on an unknown volume: %v (%s); want ERROR_PATH_NOT_FOUND naming Container.Storage.Path", err, doc)
	}

	layerCall(t, c, 0, wire.MethodUnprepareLayer, wire.LayerArgs{Path: scratch})
	if _, err := os.Lstat(filepath.Join(dosdevices, "volume{"+guid+"}")); err == nil {
		t.Errorf("UnprepareLayer left the dosdevices link")
	}
	layerCall(t, c, hresult.ErrInvalidState, wire.MethodUnprepareLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, 0, wire.MethodDeactivateLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, hresult.ErrNotFound, wire.MethodDeactivateLayer, wire.LayerArgs{Path: scratch})
	// The scratch keeps what the container wrote for its next activation.
	layerCall(t, c, 0, wire.MethodActivateLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, 0, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: parents})
	mp = mountPath(t, c, wire.LayerArgs{Path: scratch})
	guid, _ = storage.VolumeGUID(mp.Path)
	if b, err := os.ReadFile(filepath.Join(layout.VolumesDir(d.engine.cfg.Root), guid, "data", "new.txt")); err != nil || string(b) != "written" {
		t.Errorf("after reactivation: %q, %v", b, err)
	}
	layerCall(t, c, 0, wire.MethodUnprepareLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, c, 0, wire.MethodDeactivateLayer, wire.LayerArgs{Path: scratch})

	// A folder layer's mount path is the folder, prepared without parents too.
	layerCall(t, c, 0, wire.MethodActivateLayer, wire.LayerArgs{Path: base})
	if mp := mountPath(t, c, wire.LayerArgs{Path: base}); mp.Volume || mp.Path != base {
		t.Errorf("GetLayerMountPath of a folder layer = %+v, want %s", mp, base)
	}
	layerCall(t, c, 0, wire.MethodPrepareLayer, wire.LayerArgs{Path: base})
	if mp := mountPath(t, c, wire.LayerArgs{Path: base}); mp.Volume || mp.Path != base {
		t.Errorf("GetLayerMountPath of a prepared folder layer = %+v, want %s", mp, base)
	}
	layerCall(t, c, 0, wire.MethodUnprepareLayer, wire.LayerArgs{Path: base})
	layerCall(t, c, 0, wire.MethodDeactivateLayer, wire.LayerArgs{Path: base})

	// A view (a folder layer over parents) is a read-only volume of its parents.
	view := filepath.Join(t.TempDir(), "view")
	os.Mkdir(view, 0o755)
	layerCall(t, c, 0, wire.MethodActivateLayer, wire.LayerArgs{Path: view})
	layerCall(t, c, 0, wire.MethodPrepareLayer, wire.LayerArgs{Path: view, Parents: parents})
	mp = mountPath(t, c, wire.LayerArgs{Path: view})
	guid, _ = storage.VolumeGUID(mp.Path)
	vt := filepath.Join(layout.VolumesDir(d.engine.cfg.Root), guid)
	if b, err := os.ReadFile(filepath.Join(vt, "data", "mid.txt")); err != nil || string(b) != "from mid" {
		t.Errorf("reading the view: %q, %v", b, err)
	}
	if err := os.WriteFile(filepath.Join(vt, "x"), nil, 0o644); err == nil {
		t.Errorf("a view is writable")
	}
	layerCall(t, c, 0, wire.MethodUnprepareLayer, wire.LayerArgs{Path: view})
	layerCall(t, c, 0, wire.MethodDeactivateLayer, wire.LayerArgs{Path: view})

	var ex wire.LayerExistsReply
	if err := layerCall(t, c, 0, wire.MethodLayerExists, wire.LayerArgs{Path: scratch}).DecodeReply(&ex); err != nil || !ex.Exists {
		t.Errorf("LayerExists of %s: %+v, %v", scratch, ex, err)
	}
	layerCall(t, c, 0, wire.MethodDestroyLayer, wire.LayerArgs{Path: scratch})
	if err := layerCall(t, c, 0, wire.MethodLayerExists, wire.LayerArgs{Path: scratch}).DecodeReply(&ex); err != nil || ex.Exists {
		t.Errorf("LayerExists after DestroyLayer: %+v, %v", ex, err)
	}
	var g1, g2 wire.GuidReply
	layerCall(t, c, 0, wire.MethodNameToGuid, wire.NameArgs{Name: "layer"}).DecodeReply(&g1)
	layerCall(t, c, 0, wire.MethodNameToGuid, wire.NameArgs{Name: "layer"}).DecodeReply(&g2)
	if g1.GUID == "" || g1 != g2 {
		t.Errorf("NameToGuid is not stable: %q, %q", g1.GUID, g2.GUID)
	}
	f = layerCall(t, c, computecore.E_NOTIMPL, wire.MethodCopyLayer, wire.LayerArgs{Path: scratch})
	if !strings.Contains(f.Result, "CopyLayer") {
		t.Errorf("CopyLayer: %s; want it named", f.Result)
	}
	var bi wire.BaseImagesReply
	if err := layerCall(t, c, 0, wire.MethodGetBaseImages, struct{}{}).DecodeReply(&bi); err != nil || bi.Document != `{"Images":[]}` {
		t.Errorf("GetBaseImages: %+v, %v; want an empty list", bi, err)
	}
	// ImportLayer is emulated (layerimport_linux_test.go): a missing layer folder is named.
	f = layerCall(t, c, computecore.E_PATH_NOT_FOUND, wire.MethodImportLayer, wire.LayerArgs{Path: scratch})
	if !strings.Contains(f.Result, "Path") {
		t.Errorf("ImportLayer of a missing folder: %s; want the field named", f.Result)
	}
	layerCall(t, c, computecore.E_INVALIDARG, wire.MethodActivateLayer, wire.LayerArgs{Path: "relative/layer"})
}

// TestStorageFilterOutlivesDaemon: layers stay attached when the client that attached them goes,
// and a daemon that starts on the root of a dead one detaches what it left.
func TestStorageFilterOutlivesDaemon(t *testing.T) {
	requireRoot(t)
	root := filepath.Join(t.TempDir(), "root")
	e, err := NewEngine(context.Background(), Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, scratch := filepath.Join(dir, "base"), filepath.Join(dir, "scratch")
	if err := os.MkdirAll(filepath.Join(base, "Files"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	dosdevices := filepath.Join(dir, "dosdevices")
	os.Mkdir(dosdevices, 0o755)
	for _, step := range []func() error{
		func() error {
			return e.storage.CreateSandbox(ctx, wire.LayerArgs{Path: scratch, Parents: []string{base}})
		},
		func() error { return e.storage.Activate(ctx, wire.LayerArgs{Path: scratch}) },
		func() error {
			return e.storage.Prepare(ctx, wire.LayerArgs{Path: scratch, Parents: []string{base}, DosDevices: dosdevices})
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	mp, err := e.storage.MountPath(ctx, wire.LayerArgs{Path: scratch})
	if err != nil {
		t.Fatal(err)
	}
	guid, _ := storage.VolumeGUID(mp.Path)
	target := filepath.Join(root, "volumes", guid)
	if !mounted(t, target) {
		t.Fatalf("%s is not mounted", target)
	}
	// The daemon dies: its lock goes with the process, nothing else is undone.
	e.lock.Close()
	e2, err := NewEngine(ctx, Config{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close(ctx)
	if mounted(t, target) {
		t.Errorf("the restarted daemon left %s mounted", target)
	}
	if _, err := os.Lstat(filepath.Join(dosdevices, "volume{"+guid+"}")); err == nil {
		t.Errorf("the restarted daemon left the dosdevices link")
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "volumes")); len(entries) != 0 {
		t.Errorf("the restarted daemon left %d entries in volumes/", len(entries))
	}
	if _, err := e2.storage.MountPath(ctx, wire.LayerArgs{Path: scratch}); err == nil {
		t.Errorf("the restarted daemon still knows the layer")
	}
}

func mounted(t *testing.T, target string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == target {
			return true
		}
	}
	return false
}

// TestStorageFilterOutlivesClient: a layer another client attached stays attached after that
// client's connection is gone, and any client can detach it, as vmcompute's layers belong to
// the service and not to the process that activated them.
func TestStorageFilterOutlivesClient(t *testing.T) {
	d := startDaemon(t)
	first := dialTCP(t, d.tcpAddr)
	base, _ := baseLayers(t, first)
	scratch := filepath.Join(t.TempDir(), "scratch")
	layerCall(t, first, 0, wire.MethodCreateSandboxLayer, wire.LayerArgs{Path: scratch, Parents: []string{base}})
	layerCall(t, first, 0, wire.MethodActivateLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, first, 0, wire.MethodPrepareLayer, wire.LayerArgs{Path: scratch, Parents: []string{base}})
	vol := mountPath(t, first, wire.LayerArgs{Path: scratch})
	first.c.Close()

	second := dialTCP(t, d.tcpAddr)
	// The server forgets a connection asynchronously; the volume must still be there after.
	time.Sleep(200 * time.Millisecond)
	if again := mountPath(t, second, wire.LayerArgs{Path: scratch}); again != vol {
		t.Fatalf("after the first client went: GetLayerMountPath = %+v, want %+v", again, vol)
	}
	guid, _ := storage.VolumeGUID(vol.Path)
	if !mounted(t, filepath.Join(layout.VolumesDir(d.engine.cfg.Root), guid)) {
		t.Fatal("the volume was unmounted when its client went")
	}
	layerCall(t, second, 0, wire.MethodUnprepareLayer, wire.LayerArgs{Path: scratch})
	layerCall(t, second, 0, wire.MethodDeactivateLayer, wire.LayerArgs{Path: scratch})
	if mounted(t, filepath.Join(layout.VolumesDir(d.engine.cfg.Root), guid)) {
		t.Error("still mounted after UnprepareLayer and DeactivateLayer")
	}
}
