package layers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/containerd/api/types"
	"github.com/containerd/errdefs"
)

func TestFromMounts(t *testing.T) {
	tests := []struct {
		name   string
		mounts []*types.Mount
		want   *Chain
		err    string
	}{
		{"none", nil, nil, ""},
		{"rw", []*types.Mount{{Type: "windows-layer", Source: "/s/3", Options: []string{"rw", `parentLayerPaths=["/s/2","/s/1"]`}}},
			&Chain{Scratch: "/s/3", Parents: []string{"/s/2", "/s/1"}}, ""},
		{"ro view", []*types.Mount{{Type: "windows-layer", Source: "/s/3", Options: []string{"ro", `parentLayerPaths=[]`}}},
			&Chain{Scratch: "/s/3", Parents: []string{}, ReadOnly: true}, ""},
		{"base only", []*types.Mount{{Type: "windows-layer", Source: `C:\s\1`, Options: []string{"rw"}}},
			&Chain{Scratch: `C:\s\1`}, ""},
		{"two mounts", []*types.Mount{{Type: "windows-layer", Source: "a"}, {Type: "windows-layer", Source: "b"}}, nil, "2 mounts"},
		{"type", []*types.Mount{{Type: "overlay", Source: "a"}}, nil, `"overlay"`},
		{"no source", []*types.Mount{{Type: "windows-layer"}}, nil, "no source"},
		{"bad json", []*types.Mount{{Type: "windows-layer", Source: "a", Options: []string{"parentLayerPaths=[/s/2]"}}}, nil, "parentLayerPaths=[/s/2]"},
		{"empty parent", []*types.Mount{{Type: "windows-layer", Source: "a", Options: []string{`parentLayerPaths=[""]`}}}, nil, "parentLayerPaths[0]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromMounts(tc.mounts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errdefs.IsInvalidArgument(err) {
					t.Fatalf("err = %v, want InvalidArgument naming %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && (got.Scratch != tc.want.Scratch || !slices.Equal(got.Parents, tc.want.Parents) || got.ReadOnly != tc.want.ReadOnly)) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFromLayerFolders(t *testing.T) {
	c, err := FromLayerFolders([]string{"/top", "/base", "/scratch"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Scratch != "/scratch" || !slices.Equal(c.Parents, []string{"/top", "/base"}) {
		t.Errorf("chain %+v", c)
	}
	if got := c.LayerFolders(); !slices.Equal(got, []string{"/top", "/base", "/scratch"}) {
		t.Errorf("round trip %v", got)
	}
	if _, err := FromLayerFolders([]string{"/only"}); !errdefs.IsInvalidArgument(err) {
		t.Errorf("one folder: %v", err)
	}
	if c, err := FromLayerFolders(nil); c != nil || err != nil {
		t.Errorf("none: %v %v", c, err)
	}
}

type recordingFilter struct {
	calls []string
	err   error
}

func (r *recordingFilter) Mount(_ context.Context, scratch string, parents []string) (string, error) {
	r.calls = append(r.calls, "mount "+scratch+" "+strings.Join(parents, ","))
	return scratch + "/vol", r.err
}

func (r *recordingFilter) Unmount(_ context.Context, scratch string) error {
	r.calls = append(r.calls, "unmount "+scratch)
	return r.err
}

func TestMounter(t *testing.T) {
	f := &recordingFilter{}
	m := &Mounter{Filter: f}
	vol, err := m.Mount(context.Background(), &Chain{Scratch: "/s", Parents: []string{"/p2", "/p1"}})
	if err != nil || vol != "/s/vol" {
		t.Fatalf("Mount = %q, %v", vol, err)
	}
	if err := m.Unmount(context.Background(), "/s"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"mount /s /p2,/p1", "unmount /s"}; !slices.Equal(f.calls, want) {
		t.Errorf("calls %v", f.calls)
	}
	f.err = errors.New("boom")
	if _, err := m.Mount(context.Background(), &Chain{Scratch: "/s"}); err == nil || !strings.Contains(err.Error(), `"/s"`) {
		t.Errorf("error %v does not name the scratch", err)
	}
}
