package wclayer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

// TestLayerChain checks layerchain.json as hcsshim and vmcompute read it: a JSON array of the
// parent folders, nearest first, written with encoding/json (so Windows paths carry escaped
// backslashes), "[]" for no parents, and no file at all meaning a base layer.
func TestLayerChain(t *testing.T) {
	tests := []struct {
		name    string
		parents []string
		file    string // the exact bytes expected in layerchain.json
		read    []string
	}{
		{"windows paths", []string{`C:\layers\2`, `C:\layers\1`}, `["C:\\layers\\2","C:\\layers\\1"]`, []string{`C:\layers\2`, `C:\layers\1`}},
		{"linux paths", []string{"/var/lib/wcow/snapshots/2", "/var/lib/wcow/snapshots/1"}, `["/var/lib/wcow/snapshots/2","/var/lib/wcow/snapshots/1"]`, []string{"/var/lib/wcow/snapshots/2", "/var/lib/wcow/snapshots/1"}},
		{"characters json escapes", []string{`C:\a&b<c>"d"`}, `["C:\\a\u0026b\u003cc\u003e\"d\""]`, []string{`C:\a&b<c>"d"`}},
		{"no parents", nil, `[]`, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			layer := t.TempDir()
			if err := WriteLayerChain(layer, tc.parents); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(filepath.Join(layer, LayerChainFile))
			if err != nil || string(b) != tc.file {
				t.Fatalf("layerchain.json = %s, %v; want %s", b, err, tc.file)
			}
			got, err := ReadLayerChain(layer)
			if err != nil || !reflect.DeepEqual(got, tc.read) {
				t.Fatalf("ReadLayerChain = %#v, %v; want %#v", got, err, tc.read)
			}
		})
	}

	base := t.TempDir()
	if got, err := ReadLayerChain(base); got != nil || err != nil {
		t.Fatalf("ReadLayerChain of a layer without layerchain.json = %#v, %v; want nil, nil", got, err)
	}
	for _, bad := range []string{`{"parent":"C:\\x"}`, `["C:\\x"`, `[1,2]`, ``} {
		layer := t.TempDir()
		if err := os.WriteFile(filepath.Join(layer, LayerChainFile), []byte(bad), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := ReadLayerChain(layer)
		if !errors.Is(err, errdefs.ErrInvalidArgument) || !strings.Contains(err.Error(), layer) {
			t.Errorf("ReadLayerChain of %q = %v, want an invalid-argument error naming the file", bad, err)
		}
	}
	if err := WriteLayerChain(filepath.Join(base, "missing", "folder"), []string{"x"}); err == nil {
		t.Fatal("WriteLayerChain into a missing folder succeeded")
	}
	// The file is what encoding/json makes of the slice, whatever the platform's separator.
	want, _ := json.Marshal([]string{filepath.Join(base, "p")})
	if err := WriteLayerChain(base, []string{filepath.Join(base, "p")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(base, LayerChainFile)); string(b) != string(want) {
		t.Fatalf("layerchain.json = %s, want %s", b, want)
	}
}

// TestSplitTarName checks the name rules that both importers (the emulator's and the checker
// in front of ociwclayer) apply to every entry.
func TestSplitTarName(t *testing.T) {
	tests := []struct {
		name string
		segs []string // nil: refused
	}{
		{"Files", []string{"Files"}},
		{"Files/", []string{"Files"}},
		{"Files/Windows/System32/cmd.exe", []string{"Files", "Windows", "System32", "cmd.exe"}},
		{`Files\Windows\notepad.exe`, []string{"Files", "Windows", "notepad.exe"}},
		{"Files/./a//b/", []string{"Files", "a", "b"}},
		{"Hives/DefaultUser_Delta", []string{"Hives", "DefaultUser_Delta"}},
		{"UtilityVM/Files/EFI", []string{"UtilityVM", "Files", "EFI"}},
		{"Files/" + strings.Repeat("a", maxComponentLen), []string{"Files", strings.Repeat("a", maxComponentLen)}},
		{"", nil},
		{".", nil},
		{"Files/../x", nil},
		{`Files\..\x`, nil},
		{"/Files/x", nil},
		{`\Files\x`, nil},
		{"C:/Files/x", nil},
		{"c:Files", nil},
		{"Files/a:stream", nil},
		{"Files/a\x00b", nil},
		{"Other/x", nil},
		{"files/x", nil}, // the top folders are spelled exactly
		{"Files/" + strings.Repeat("a", maxComponentLen+1), nil},
		{"Files/" + strings.Repeat("a/", maxPathLen/2), nil},
	}
	for _, tc := range tests {
		segs, err := splitTarName(tc.name)
		if tc.segs == nil {
			if err == nil {
				t.Errorf("splitTarName(%.40q) = %q, want an error", tc.name, segs)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(segs, tc.segs) {
			t.Errorf("splitTarName(%.40q) = %q, %v; want %q", tc.name, segs, err, tc.segs)
		}
	}
}

// TestSymlinkEscapes checks which symlink targets climb above the top folder of the layer.
func TestSymlinkEscapes(t *testing.T) {
	tests := []struct {
		link, target string
		escapes      bool
	}{
		{"Files/a/l", "b", false},
		{"Files/a/l", "..", false},
		{"Files/a/l", "../..", true},
		{"Files/a/l", `..\..\x`, true},
		{"Files/l", "../x", true},
		{"Files/a/b/l", "../../c/../x", false},
		{"Files/a/b/l", "../../c/../../x", true},
		{"Files/a/l", "./../b/./..", false},
		{"Files/l", `C:\Users`, false}, // absolute Windows targets stay in the container's volume
		{"Files/l", `\Windows`, false},
		{"Files/l", "/etc", false},
	}
	for _, tc := range tests {
		segs, err := splitTarName(tc.link)
		if err != nil {
			t.Fatal(err)
		}
		if got := symlinkEscapes(segs, tc.target); got != tc.escapes {
			t.Errorf("symlink %s -> %s escapes = %v, want %v", tc.link, tc.target, got, tc.escapes)
		}
	}
}
