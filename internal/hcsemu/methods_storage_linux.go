package hcsemu

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of the storage filter (vmcompute.dll's layer functions, wire/storage.go),
// served by the Engine's storageFilter. See dispatch_linux.go for the table they join.

var storageMethods = map[string]method{
	wire.MethodActivateLayer:       layerMethod((*storageFilter).Activate),
	wire.MethodDeactivateLayer:     layerMethod((*storageFilter).Deactivate),
	wire.MethodPrepareLayer:        layerMethod((*storageFilter).Prepare),
	wire.MethodUnprepareLayer:      layerMethod((*storageFilter).Unprepare),
	wire.MethodCreateSandboxLayer:  layerMethod((*storageFilter).CreateSandbox),
	wire.MethodExpandSandboxSize:   layerMethod((*storageFilter).ExpandSandbox),
	wire.MethodDestroyLayer:        layerMethod((*storageFilter).Destroy),
	wire.MethodProcessBaseImage:    layerMethod((*storageFilter).ProcessBaseImage),
	wire.MethodProcessUtilityImage: layerMethod((*storageFilter).ProcessUtilityImage),
	wire.MethodGetLayerMountPath: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
		r, err := e.storage.MountPath(ctx, a)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodLayerExists: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
		r, err := e.storage.Exists(ctx, a)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodNameToGuid: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.NameArgs) (dispatch.Answer, error) {
		r, err := e.storage.NameToGUID(ctx, a)
		return dispatch.Answer{Reply: r}, err
	}),
	wire.MethodGrantVmAccess: withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.GrantVmAccessArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, e.storage.GrantVMAccess(ctx, a)
	}),
	wire.MethodGetBaseImages: func(context.Context, *Engine, Subscriber, *wire.Frame) (dispatch.Answer, error) {
		return dispatch.Answer{Reply: wire.BaseImagesReply{Document: sharedBaseImages}}, nil
	},
	wire.MethodCreateLayer: notEmulatedMethod(wire.MethodCreateLayer),
	wire.MethodCopyLayer:   notEmulatedMethod(wire.MethodCopyLayer),
	wire.MethodImportLayer: layerMethod((*storageFilter).Import),
	wire.MethodExportLayer: layerMethod((*storageFilter).Export),
}

// sharedBaseImages is GetBaseImages' answer: the base images installed on the host itself
// (Windows Server 2016's shared base images, which hcsshim's GetSharedBaseImages lists), in
// the document's shape as its callers read it, {"Images":[{"Name","Path","Version","Size",
// "CreatedTime"},…]}. Assumption: Microsoft documents neither the function nor the document;
// the emulated host has no such images (images reach it only as layers), so the list is empty.
const sharedBaseImages = `{"Images":[]}`

// layerMethod serves a layer function that answers only its HRESULT.
func layerMethod(fn func(*storageFilter, context.Context, wire.LayerArgs) error) method {
	return withArgs(func(ctx context.Context, e *Engine, _ Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, fn(e.storage, ctx, a)
	})
}

// notEmulatedMethod answers a layer function the emulator does not have yet with E_NOTIMPL
// naming it.
func notEmulatedMethod(name string) method {
	return func(context.Context, *Engine, Subscriber, *wire.Frame) (dispatch.Answer, error) {
		return dispatch.Answer{}, notEmulated(name)
	}
}
