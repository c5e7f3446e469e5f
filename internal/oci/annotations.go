package oci

import (
	"fmt"
	"strconv"

	"github.com/containerd/errdefs"
)

// Resource annotations, spelled as hcsshim publishes them (pkg/annotations in
// Microsoft/hcsshim). They override the matching spec.windows.resources field.
const (
	AnnotationProcessorCount   = "io.microsoft.container.processor.count"
	AnnotationProcessorLimit   = "io.microsoft.container.processor.limit"
	AnnotationProcessorWeight  = "io.microsoft.container.processor.weight"
	AnnotationMemorySizeInMB   = "io.microsoft.container.memory.sizeinmb"
	AnnotationStorageQoSIops   = "io.microsoft.container.storage.qos.iopsmaximum"
	AnnotationStorageQoSBps    = "io.microsoft.container.storage.qos.bandwidthmaximum"
	AnnotationContainerType    = "io.kubernetes.cri.container-type"
	AnnotationSandboxID        = "io.kubernetes.cri.sandbox-id"
	AnnotationLegacyIsolation  = "experimental.windows.kubernetes.io/isolation-type"
	legacyIsolationHyperVValue = "hyperv"
)

// annotationUint parses a non-negative integer annotation; ok is false when it is absent.
func annotationUint(annotations map[string]string, key string, bits int) (v uint64, ok bool, err error) {
	s, found := annotations[key]
	if !found {
		return 0, false, nil
	}
	v, err = strconv.ParseUint(s, 10, bits)
	if err != nil {
		return 0, false, fmt.Errorf("annotation %s=%q: want a non-negative integer of at most %d bits: %w", key, s, bits, errdefs.ErrInvalidArgument)
	}
	return v, true, nil
}
