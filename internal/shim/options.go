package shim

import (
	"context"
	"fmt"

	"github.com/containerd/errdefs"
	"github.com/containerd/log"
	"github.com/containerd/typeurl/v2"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/protocols/options"
)

// decodeOptions decodes and validates the runtime options containerd sends with a task create
// request (and on the start action's stdin): containerd.runhcs.v1.Options. A nil or empty Any
// gives the defaults.
func decodeOptions(a *anypb.Any) (*options.Options, error) {
	if a == nil || (a.GetTypeUrl() == "" && len(a.GetValue()) == 0) {
		return &options.Options{}, nil
	}
	v, err := typeurl.UnmarshalAny(a)
	if err != nil {
		return nil, fmt.Errorf("runtime options of type %q: %v: %w", a.GetTypeUrl(), err, errdefs.ErrInvalidArgument)
	}
	o, ok := v.(*options.Options)
	if !ok {
		return nil, fmt.Errorf("runtime options: got %q, want containerd.runhcs.v1.Options: %w", a.GetTypeUrl(), errdefs.ErrInvalidArgument)
	}
	if err := validateOptions(o); err != nil {
		return nil, err
	}
	return o, nil
}

func validateOptions(o *options.Options) error {
	if o.GetLogLevel() != "" {
		if _, err := logrus.ParseLevel(o.GetLogLevel()); err != nil {
			return fmt.Errorf("runtime options: log_level=%q: want one of trace, debug, info, warn, error, fatal, panic: %w", o.GetLogLevel(), errdefs.ErrInvalidArgument)
		}
	}
	if _, ok := options.Options_SandboxIsolation_name[int32(o.GetSandboxIsolation())]; !ok {
		return fmt.Errorf("runtime options: sandbox_isolation=%d: want PROCESS (0) or HYPERVISOR (1): %w", o.GetSandboxIsolation(), errdefs.ErrInvalidArgument)
	}
	if _, ok := options.Options_DebugType_name[int32(o.GetDebugType())]; !ok {
		return fmt.Errorf("runtime options: debug_type=%d: unknown: %w", o.GetDebugType(), errdefs.ErrInvalidArgument)
	}
	for name, v := range map[string]int32{
		"vm_processor_count":                   o.GetVmProcessorCount(),
		"vm_memory_size_in_mb":                 o.GetVmMemorySizeInMb(),
		"default_container_scratch_size_in_gb": o.GetDefaultContainerScratchSizeInGb(),
		"default_vm_scratch_size_in_gb":        o.GetDefaultVmScratchSizeInGb(),
		"io_retry_timeout_in_sec":              o.GetIoRetryTimeoutInSec(),
	} {
		if v < 0 {
			return fmt.Errorf("runtime options: %s=%d: must not be negative: %w", name, v, errdefs.ErrInvalidArgument)
		}
	}
	if o.GetSandboxPlatform() != "" && o.GetSandboxPlatform() != "windows/amd64" && o.GetSandboxPlatform() != "windows/arm64" {
		return fmt.Errorf("runtime options: sandbox_platform=%q: this shim runs Windows containers only: %w", o.GetSandboxPlatform(), errdefs.ErrInvalidArgument)
	}
	return nil
}

// logLevel is the level the options ask for: log_level wins over debug; "" keeps the current.
func logLevel(o *options.Options) string {
	if o.GetLogLevel() != "" {
		return o.GetLogLevel()
	}
	if o.GetDebug() {
		return "debug"
	}
	return ""
}

// applyLogLevel honours the options' debug and log_level.
func applyLogLevel(ctx context.Context, o *options.Options) {
	if l := logLevel(o); l != "" {
		if err := log.SetLevel(l); err != nil {
			log.G(ctx).WithError(err).WithField("level", l).Warn("set log level")
		}
	}
}
