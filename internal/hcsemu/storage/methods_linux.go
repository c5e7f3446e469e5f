package storage

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/dispatch"
	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// The wire methods of the storage filter (vmcompute.dll's layer functions, wire/storage.go),
// served by a Filter; the emulator's server composes its table from Methods.

// Methods are the wire methods f serves, by wire name.
func Methods(f *Filter) map[string]dispatch.Method {
	return map[string]dispatch.Method{
		wire.MethodActivateLayer:       layerMethod(f, (*Filter).Activate),
		wire.MethodDeactivateLayer:     layerMethod(f, (*Filter).Deactivate),
		wire.MethodPrepareLayer:        layerMethod(f, (*Filter).Prepare),
		wire.MethodUnprepareLayer:      layerMethod(f, (*Filter).Unprepare),
		wire.MethodCreateSandboxLayer:  layerMethod(f, (*Filter).CreateSandbox),
		wire.MethodExpandSandboxSize:   layerMethod(f, (*Filter).ExpandSandbox),
		wire.MethodDestroyLayer:        layerMethod(f, (*Filter).Destroy),
		wire.MethodProcessBaseImage:    layerMethod(f, (*Filter).ProcessBaseImage),
		wire.MethodProcessUtilityImage: layerMethod(f, (*Filter).ProcessUtilityImage),
		wire.MethodGetLayerMountPath: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
			r, err := f.MountPath(ctx, a)
			return dispatch.Answer{Reply: r}, err
		}),
		wire.MethodLayerExists: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
			r, err := f.Exists(ctx, a)
			return dispatch.Answer{Reply: r}, err
		}),
		wire.MethodNameToGuid: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.NameArgs) (dispatch.Answer, error) {
			r, err := f.NameToGUID(ctx, a)
			return dispatch.Answer{Reply: r}, err
		}),
		wire.MethodGrantVmAccess: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.GrantVmAccessArgs) (dispatch.Answer, error) {
			return dispatch.Answer{}, f.GrantVMAccess(ctx, a)
		}),
		wire.MethodGetBaseImages: func(context.Context, dispatch.Subscriber, *wire.Frame) (dispatch.Answer, error) {
			return dispatch.Answer{Reply: wire.BaseImagesReply{Document: sharedBaseImages}}, nil
		},
		wire.MethodCreateLayer: notEmulatedMethod(wire.MethodCreateLayer),
		wire.MethodCopyLayer:   notEmulatedMethod(wire.MethodCopyLayer),
		wire.MethodImportLayer: layerMethod(f, (*Filter).Import),
		wire.MethodExportLayer: layerMethod(f, (*Filter).Export),
		wire.MethodBindSetup: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.BindArgs) (dispatch.Answer, error) {
			return dispatch.Answer{}, f.BindSetup(ctx, a)
		}),
		wire.MethodBindRemove: dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.BindArgs) (dispatch.Answer, error) {
			return dispatch.Answer{}, f.BindRemove(ctx, a)
		}),
	}
}

// sharedBaseImages is GetBaseImages' answer: the base images installed on the host itself
// (Windows Server 2016's shared base images, which hcsshim's GetSharedBaseImages lists), in
// the document's shape as its callers read it, {"Images":[{"Name","Path","Version","Size",
// "CreatedTime"},…]}. Assumption: Microsoft documents neither the function nor the document;
// the emulated host has no such images (images reach it only as layers), so the list is empty.
const sharedBaseImages = `{"Images":[]}`

// layerMethod serves a layer function that answers only its HRESULT.
func layerMethod(f *Filter, fn func(*Filter, context.Context, wire.LayerArgs) error) dispatch.Method {
	return dispatch.WithArgs(func(ctx context.Context, _ dispatch.Subscriber, a wire.LayerArgs) (dispatch.Answer, error) {
		return dispatch.Answer{}, fn(f, ctx, a)
	})
}

// notEmulatedMethod answers a layer function the emulator does not have yet with E_NOTIMPL
// naming it.
func notEmulatedMethod(name string) dispatch.Method {
	return func(context.Context, dispatch.Subscriber, *wire.Frame) (dispatch.Answer, error) {
		return dispatch.Answer{}, notEmulated(name)
	}
}
