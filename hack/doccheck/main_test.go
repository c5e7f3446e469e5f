package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"Status":                                 "status",
		"The emulator's contract":                "the-emulators-contract",
		"`make test-windows`: Wine":              "make-test-windows-wine",
		"containerd 2.x (`version = 3`)":         "containerd-2x-version--3",
		"Utility VMs (Hyper-V isolation)":        "utility-vms-hyper-v-isolation",
		"Pods, [links](x.md) and under_scores":   "pods-links-and-under_scores",
		"Linux-native × emulated node — Windows": "linux-native--emulated-node--windows",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheck plants good and broken links in a small tree and expects exactly the broken ones,
// each with its file and line.
func TestCheck(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("cmd/x/main.go", "package main\n")
	write("docs/b.md", "# B page\n\n## Same\n\n## Same\n\n<a id=\"custom\"></a>\n")
	write("README.md", strings.Join([]string{
		"# Top",                                                     // 1
		"[ok](docs/b.md) [ok](docs/b.md#b-page)",                    // 2
		"[ok](docs/b.md#same-1) [ok](#top)",                         // 3
		"[ok](cmd/x/) [ok](cmd/x/main.go#L1)",                       // 4
		"[ok](https://example.com/#nothing) [ok](docs/b.md#custom)", // 5
		"```sh",                      // 6
		"[not a link](missing.md)",   // 7
		"```",                        // 8
		"`[code](missing.md)`",       // 9
		"[bad](docs/missing.md)",     // 10
		"[bad](docs/b.md#nope)",      // 11
		"[bad](#same-2) [bad](../x)", // 12
		"[ref]: docs/gone.md",        // 13
		"[bad](cmd/x/main.go#intro)", // 14
	}, "\n"))
	got, err := check(root, []string{"README.md", "docs/b.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`README.md:10: broken link "docs/missing.md": no such file or folder docs/missing.md`,
		`README.md:11: broken link "docs/b.md#nope": no heading with anchor #nope in docs/b.md`,
		`README.md:12: broken link "#same-2": no heading with anchor #same-2 in README.md`,
		`README.md:12: broken link "../x": outside the repository`,
		`README.md:13: broken link "docs/gone.md": no such file or folder docs/gone.md`,
		`README.md:14: broken link "cmd/x/main.go#intro": an anchor in a file that is not Markdown`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("check found:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRepository checks the repository's own documentation, as hack/lint.sh does.
func TestRepository(t *testing.T) {
	root := "../.."
	files := []string{"README.md", "CONTRIBUTING.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	problems, err := check(root, files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}
