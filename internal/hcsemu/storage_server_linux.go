package hcsemu

import (
	"context"

	"github.com/openhcs/runhcs/internal/hcsemu/wire"
)

// handleStorage serves the storage filter's methods (wire/storage.go); ok is false for a method
// that is not one of them.
func (c *conn) handleStorage(ctx context.Context, f *wire.Frame) (reply any, ok bool, err error) {
	sf := c.srv.e.storage
	layer := func(fn func(context.Context, wire.LayerArgs) error) {
		var a wire.LayerArgs
		if err = f.DecodeArgs(&a); err == nil {
			err = fn(ctx, a)
		}
	}
	switch f.Method {
	case wire.MethodActivateLayer:
		layer(sf.Activate)
	case wire.MethodDeactivateLayer:
		layer(sf.Deactivate)
	case wire.MethodPrepareLayer:
		layer(sf.Prepare)
	case wire.MethodUnprepareLayer:
		layer(sf.Unprepare)
	case wire.MethodCreateSandboxLayer:
		layer(sf.CreateSandbox)
	case wire.MethodExpandSandboxSize:
		layer(sf.ExpandSandbox)
	case wire.MethodDestroyLayer:
		layer(sf.Destroy)
	case wire.MethodProcessBaseImage:
		layer(sf.ProcessBaseImage)
	case wire.MethodProcessUtilityImage:
		layer(sf.ProcessUtilityImage)
	case wire.MethodGetLayerMountPath:
		var a wire.LayerArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = sf.MountPath(ctx, a)
		}
	case wire.MethodLayerExists:
		var a wire.LayerArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = sf.Exists(ctx, a)
		}
	case wire.MethodNameToGuid:
		var a wire.NameArgs
		if err = f.DecodeArgs(&a); err == nil {
			reply, err = sf.NameToGUID(ctx, a)
		}
	case wire.MethodGrantVmAccess:
		var a wire.GrantVmAccessArgs
		if err = f.DecodeArgs(&a); err == nil {
			err = sf.GrantVMAccess(ctx, a)
		}
	case wire.MethodGetBaseImages, wire.MethodCreateLayer, wire.MethodCopyLayer, wire.MethodImportLayer, wire.MethodExportLayer:
		err = notEmulated(f.Method)
	default:
		return nil, false, nil
	}
	return reply, true, err
}
