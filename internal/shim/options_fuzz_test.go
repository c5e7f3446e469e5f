package shim

import (
	"strings"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/containerd/typeurl/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/openhcs/runhcs/protocols/options"
)

// FuzzDecodeOptions feeds arbitrary bytes to the runtime options decoder as the value of a
// containerd.runhcs.v1.Options Any, as containerd hands them over from a runtime handler's
// configuration. Whatever the bytes, it must not panic; what it accepts must be valid options
// (it is used as is); what it refuses must be an invalid-argument error that says it is about
// the runtime options.
func FuzzDecodeOptions(f *testing.F) {
	for _, o := range []*options.Options{
		{},
		{Debug: true, LogLevel: "info"},
		{SandboxIsolation: options.Options_HYPERVISOR, VmProcessorCount: 2, VmMemorySizeInMb: 1024},
		{SandboxImage: "mcr.microsoft.com/oss/kubernetes/pause:3.9", SandboxPlatform: "windows/amd64"},
		{DefaultContainerAnnotations: map[string]string{"io.microsoft.container.memory.sizeinmb": "256"}},
		{IoRetryTimeoutInSec: 30, DefaultContainerScratchSizeInGb: 20, DefaultVmScratchSizeInGb: 10},
		{LogLevel: "chatty"},
		{VmMemorySizeInMb: -1},
	} {
		b, err := proto.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	url, err := typeurl.TypeURL(&options.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		o, err := decodeOptions(&anypb.Any{TypeUrl: url, Value: value})
		if err != nil {
			if !errdefs.IsInvalidArgument(err) || !strings.HasPrefix(err.Error(), "runtime options") {
				t.Fatalf("refused with %q (%v): want an invalid-argument error about the runtime options", err, err)
			}
			return
		}
		if err := validateOptions(o); err != nil {
			t.Fatalf("accepted options that are not valid: %v", err)
		}
	})
}
