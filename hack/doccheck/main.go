// Command doccheck checks that every relative link in the project's Markdown documentation
// resolves: README.md, CONTRIBUTING.md and every .md file under docs/ (or the files and folders
// given as arguments). A link's path must name a file or folder of the repository, and its
// #anchor a heading (or an explicit <a id>/<a name>) of the Markdown file it points to, spelled
// as GitHub spells heading anchors. Links with a scheme (https:, mailto:, …) are not followed;
// links inside code blocks and code spans are not links. Each broken link is reported as
// file:line with the link and why, and the exit status is 1 if any was found.
//
//	go run ./hack/doccheck [FILE|DIR …]    (from the repository's root; hack/lint.sh runs it)
package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	paths := os.Args[1:]
	if len(paths) == 0 {
		paths = []string{"README.md", "CONTRIBUTING.md", "docs"}
	}
	files, err := markdownFiles(paths)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	problems, err := check(".", files)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(2)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "doccheck: %d broken links in %d files\n", len(problems), len(files))
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "doccheck: every relative link resolves (%d files)\n", len(files))
}

// markdownFiles expands folders into the .md files under them, sorted.
func markdownFiles(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, filepath.Clean(p))
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
				files = append(files, path)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

// A link is a link's target as written and the line it is on.
type link struct {
	target string
	line   int
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	heading    = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:[^>]*\s)?(?:id|name)="([^"]+)"`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// scan returns the links of a Markdown text and the anchors its headings (and <a id>s) define.
func scan(text string) (links []link, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	inFence := ""
	for i, l := range strings.Split(text, "\n") {
		if m := fence.FindStringSubmatch(l); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case inFence == m[1]:
				inFence = ""
			}
			continue
		}
		if inFence != "" {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(l, -1) {
			anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(l); m != nil {
			slug := Slug(m[2])
			if n := seen[slug]; n > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, n)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		if m := refDef.FindStringSubmatch(l); m != nil {
			links = append(links, link{m[1], i + 1})
			continue
		}
		plain := codeSpan.ReplaceAllString(l, "")
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			links = append(links, link{m[1], i + 1})
		}
	}
	return links, anchors
}

// Slug is the anchor GitHub gives a heading: its text without Markdown link syntax, in lower
// case, with every character other than a letter, digit, mark, '_', '-' or space dropped and
// each space turned into '-' (github/cmark-gfm's and github-slugger's rule).
func Slug(h string) string {
	h = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// check reports every link of files (paths relative to root) that does not resolve.
func check(root string, files []string) ([]string, error) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(file string) (map[string]bool, error) {
		if a, ok := anchorsOf[file]; ok {
			return a, nil
		}
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		_, a := scan(string(text))
		anchorsOf[file] = a
		return a, nil
	}
	var problems []string
	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		links, _ := scan(string(text))
		for _, l := range links {
			if why := resolve(root, file, l.target, anchors); why != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: broken link %q: %s", file, l.line, l.target, why))
			}
		}
	}
	return problems, nil
}

// resolve says why target, a link in file, does not resolve ("" if it does).
func resolve(root, file, target string, anchors func(string) (map[string]bool, error)) string {
	if target == "" {
		return "empty link"
	}
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return "" // not a path of the repository
	}
	path, anchor, _ := strings.Cut(target, "#")
	dest := file
	if path != "" {
		if strings.HasPrefix(path, "/") {
			dest = filepath.Clean(strings.TrimPrefix(path, "/"))
		} else {
			dest = filepath.Join(filepath.Dir(file), path)
		}
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return "outside the repository"
		}
		fi, err := os.Stat(filepath.Join(root, dest))
		if err != nil {
			return "no such file or folder " + dest
		}
		if fi.IsDir() {
			if anchor != "" {
				return "an anchor on a folder"
			}
			return ""
		}
	}
	if anchor == "" {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		if regexp.MustCompile(`^L\d+(-L\d+)?$`).MatchString(anchor) {
			return "" // a line of a source file
		}
		return "an anchor in a file that is not Markdown"
	}
	a, err := anchors(dest)
	if err != nil {
		return err.Error()
	}
	if !a[anchor] {
		return "no heading with anchor #" + anchor + " in " + dest
	}
	return ""
}
