package oci

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// fuzzAnnotationKeys are the annotations the translation reads, and one it ignores.
var fuzzAnnotationKeys = []string{
	AnnotationProcessorCount,
	AnnotationProcessorLimit,
	AnnotationProcessorWeight,
	AnnotationMemorySizeInMB,
	AnnotationStorageQoSIops,
	AnnotationStorageQoSBps,
	AnnotationContainerType,
	AnnotationLegacyIsolation,
	"example.com/unrelated",
}

// FuzzAnnotations translates a spec carrying two annotations with arbitrary values
// (docs/testing.md, "Fuzzing"). A value is either refused, as InvalidArgument naming
// an annotation it was given (or the processor fields it conflicts with), or it is in the
// document: numbers land where hcsshim puts them, and the document encodes. The seed corpus is
// in testdata/fuzz/FuzzAnnotations; run `go test -fuzz FuzzAnnotations ./internal/oci` to
// search further.
func FuzzAnnotations(f *testing.F) {
	for _, s := range []struct {
		k1 uint8
		v1 string
		k2 uint8
		v2 string
	}{
		{0, "2", 8, "x"}, {1, "5000", 2, "100"}, {0, "2", 1, "100"}, {3, "0", 4, "-1"},
		{3, "18446744073709551615", 5, "1e3"}, {0, "4294967296", 6, "sandbox"}, {7, "hyperv", 3, " 64"},
	} {
		f.Add(s.k1, s.v1, s.k2, s.v2)
	}
	f.Fuzz(func(t *testing.T, k1 uint8, v1 string, k2 uint8, v2 string) {
		keys := []string{fuzzAnnotationKeys[int(k1)%len(fuzzAnnotationKeys)], fuzzAnnotationKeys[int(k2)%len(fuzzAnnotationKeys)]}
		s := baseSpec()
		s.Annotations = map[string]string{keys[0]: v1}
		s.Annotations[keys[1]] = v2 // the same key twice keeps the second value
		doc, err := ContainerDocument(s, "/mnt", parents)
		if err != nil {
			if !errdefs.IsInvalidArgument(err) {
				t.Fatalf("annotations %q: error %v is not InvalidArgument", s.Annotations, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, keys[0]) && !strings.Contains(msg, keys[1]) && !strings.Contains(msg, "windows.resources.cpu") {
				t.Fatalf("annotations %q: error %q names none of them", s.Annotations, msg)
			}
			return
		}
		if _, err := json.Marshal(doc); err != nil {
			t.Fatalf("annotations %q: document does not encode: %v", s.Annotations, err)
		}
		c := doc.Container
		number := func(key string) (uint64, bool) {
			v, ok := s.Annotations[key]
			if !ok {
				return 0, false
			}
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("annotations %q: %s=%q accepted but is not a number", s.Annotations, key, v)
			}
			return n, true
		}
		if n, ok := number(AnnotationMemorySizeInMB); ok && (c.Memory == nil || c.Memory.SizeInMB != n) {
			t.Fatalf("annotations %q: memory %+v, want %d MB", s.Annotations, c.Memory, n)
		}
		if n, ok := number(AnnotationProcessorCount); ok && (c.Processor == nil || uint64(c.Processor.Count) != n) {
			t.Fatalf("annotations %q: processor %+v, want count %d", s.Annotations, c.Processor, n)
		}
		if n, ok := number(AnnotationProcessorLimit); ok && (c.Processor == nil || c.Processor.Maximum != n) {
			t.Fatalf("annotations %q: processor %+v, want maximum %d", s.Annotations, c.Processor, n)
		}
		if n, ok := number(AnnotationProcessorWeight); ok && n > 0 && (c.Processor == nil || c.Processor.Weight != n) {
			t.Fatalf("annotations %q: processor %+v, want weight %d", s.Annotations, c.Processor, n)
		}
		if n, ok := number(AnnotationStorageQoSIops); ok && n > 0 && (c.Storage.QoS == nil || c.Storage.QoS.IopsMaximum != n) {
			t.Fatalf("annotations %q: storage QoS %+v, want %d IOPS", s.Annotations, c.Storage.QoS, n)
		}
		if n, ok := number(AnnotationStorageQoSBps); ok && n > 0 && (c.Storage.QoS == nil || c.Storage.QoS.BandwidthMaximum != n) {
			t.Fatalf("annotations %q: storage QoS %+v, want %d bytes/s", s.Annotations, c.Storage.QoS, n)
		}
	})
}
