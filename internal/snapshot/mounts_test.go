package snapshot

import (
	"errors"
	"reflect"
	"testing"

	"github.com/containerd/containerd/v2/core/mount"
	"github.com/containerd/errdefs"
)

func TestParseMounts(t *testing.T) {
	tests := []struct {
		name   string
		mounts []mount.Mount
		want   LayerMount
		err    error
	}{
		{"scratch with parents", []mount.Mount{{Type: MountType, Source: "/s/3", Options: []string{"rw", `parentLayerPaths=["/s/2","/s/1"]`}}},
			LayerMount{Source: "/s/3", Parents: []string{"/s/2", "/s/1"}}, nil},
		{"view", []mount.Mount{{Type: MountType, Source: "/s/4", Options: []string{"ro", `parentLayerPaths=["/s/2"]`}}},
			LayerMount{Source: "/s/4", Parents: []string{"/s/2"}, ReadOnly: true}, nil},
		{"base layer", []mount.Mount{{Type: MountType, Source: "/s/1", Options: []string{"rw"}}},
			LayerMount{Source: "/s/1"}, nil},
		{"overlay", []mount.Mount{{Type: "overlay", Source: "overlay"}}, LayerMount{}, errdefs.ErrNotImplemented},
		{"two mounts", []mount.Mount{{Type: MountType}, {Type: MountType}}, LayerMount{}, errdefs.ErrNotImplemented},
		{"none", nil, LayerMount{}, errdefs.ErrNotImplemented},
		{"bad JSON", []mount.Mount{{Type: MountType, Source: "/s/3", Options: []string{"rw", `parentLayerPaths=["/s/2"`}}},
			LayerMount{}, errdefs.ErrInvalidArgument},
		{"no source", []mount.Mount{{Type: MountType, Options: []string{"rw"}}}, LayerMount{}, errdefs.ErrInvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMounts(tc.mounts)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseMounts = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseMounts = %+v, %v; want %+v", got, err, tc.want)
			}
			// What layerMounts writes, ParseMounts reads back.
			back, err := ParseMounts(layerMounts(got.Source, got.Parents, got.ReadOnly))
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Fatalf("round trip = %+v, %v", back, err)
			}
		})
	}
}
