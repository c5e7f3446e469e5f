package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openhcs/runhcs/internal/winargs"
)

// cmd.exe's stand-in: `cmd [/Q] [/D] [/S] /C command` with the internal commands echo, exit
// [/B] [N], type, dir [/B], set, mkdir/md and rem, other programs found through PATH and
// PATHEXT, %NAME% expansion, the operators &, && and ||, quotes, ^ escapes and the
// redirections >, >>, 1>, 2> and 2>&1. Everything else, including /K, pipes, parentheses,
// if, for and the other internal commands, is refused as not supported. Output ends lines
// with CRLF, as cmd's does.

// cmdState is one cmd.exe process.
type cmdState struct {
	*tool
	echoOff    bool
	errorlevel int
	exit       *int // set by exit: the process exit code, stop here
}

// cmdUnsupportedInternal are cmd's other internal commands (cmd /?, "help"): the stand-in
// refuses them rather than looking for a program of that name.
var cmdUnsupportedInternal = map[string]bool{
	"assoc": true, "break": true, "call": true, "cd": true, "chdir": true, "cls": true, "color": true,
	"copy": true, "date": true, "del": true, "endlocal": true, "erase": true, "for": true, "ftype": true,
	"goto": true, "if": true, "mklink": true, "move": true, "path": true, "pause": true, "popd": true,
	"prompt": true, "pushd": true, "rd": true, "ren": true, "rename": true, "rmdir": true,
	"setlocal": true, "shift": true, "start": true, "time": true, "title": true, "ver": true,
	"verify": true, "vol": true,
}

func cmdMain(args []string, t *tool) int {
	t.name = "cmd"
	// cmd reads its own command line (GetCommandLineW), not argv. The stand-in rebuilds it
	// from argv with the quoting the shim and hcsshim use to write HCS's CommandLine
	// (winargs.Join), which gives back the command line they wrote. Assumption: a caller
	// that passes its own raw CommandLine quoted differently may see different quoting here.
	rest := winargs.Join(args)
	s := &cmdState{tool: t}
	sFlag := false
	for {
		rest = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(rest, "/") {
			break
		}
		end := strings.IndexAny(rest, " \t")
		if end < 0 {
			end = len(rest)
		}
		sw := strings.ToLower(rest[:end])
		switch {
		case sw == "/c":
			return s.runLine(cmdStripQuotes(rest[end:], sFlag, t))
		case strings.HasPrefix(sw, "/c"):
			// "/cecho hi": the command may follow the switch directly.
			return s.runLine(cmdStripQuotes(rest[2:], sFlag, t))
		case sw == "/q":
			s.echoOff = true
		case sw == "/d":
			// No AutoRun commands to skip: the image's registry has none.
		case sw == "/s":
			sFlag = true
		default:
			return t.unsupported("the switch " + rest[:end])
		}
		rest = rest[end:]
	}
	if rest == "" {
		return t.unsupported("an interactive cmd (no /C)")
	}
	return t.unsupported("a command line without /C: " + rest)
}

// cmdStripQuotes applies cmd's rule for the quotes of the text after /C (cmd /?): they are
// kept if there is no /S, exactly two quotes, no special character (&<>()@^|) and some
// whitespace between them, and the quoted text names a program; otherwise a leading quote and
// the last quote of the line are removed.
func cmdStripQuotes(s string, sFlag bool, t *tool) string {
	s = strings.TrimLeft(s, " \t")
	if !sFlag && strings.Count(s, `"`) == 2 && strings.HasPrefix(s, `"`) {
		inner := s[1:strings.LastIndex(s, `"`)]
		if !strings.ContainsAny(inner, "&<>()@^|") && strings.ContainsAny(inner, " \t") {
			if _, ok := t.findProgram(inner); ok {
				return s
			}
		}
	}
	if strings.HasPrefix(s, `"`) {
		last := strings.LastIndex(s, `"`)
		if last > 0 {
			return s[1:last] + s[last+1:]
		}
		return s[1:]
	}
	return s
}

// expandVars replaces %NAME% with the variable's value; a name that is not set stays as it is,
// as on cmd's command line (outside batch files).
func (s *cmdState) expandVars(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '%')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		j := strings.IndexByte(line[i+1:], '%')
		if j < 0 {
			b.WriteString(line)
			return b.String()
		}
		name := line[i+1 : i+1+j]
		if v, ok := s.getenv(name); ok && name != "" {
			b.WriteString(line[:i])
			b.WriteString(v)
			line = line[i+j+2:]
			continue
		}
		// Not a variable: keep the first %, look again from the second.
		b.WriteString(line[:i+1+j])
		line = line[i+1+j:]
	}
}

// cmdRedir is one redirection of a command: handle 1 or 2 to a file (append with >>) or to the
// other handle (dup, "2>&1").
type cmdRedir struct {
	handle int
	file   string
	append bool
	dup    int
}

type cmdCommand struct {
	text   string // the command with carets and redirections removed; quotes kept
	redirs []cmdRedir
	op     string // the operator before it: "", "&", "&&" or "||"
}

// parseLine splits a line into commands at &, && and || outside quotes, handling ^ and the
// redirections; err names what the stand-in does not support.
func parseLine(line string) ([]cmdCommand, string) {
	var cmds []cmdCommand
	cur := cmdCommand{}
	var b strings.Builder
	inQuote := false
	startOfCommand := func() bool { return strings.TrimLeft(b.String(), " \t@") == "" }
	for i := 0; i < len(line); i++ {
		c := line[i]
		if inQuote {
			b.WriteByte(c)
			if c == '"' {
				inQuote = false
			}
			continue
		}
		switch c {
		case '"':
			inQuote = true
			b.WriteByte(c)
		case '^':
			if i+1 < len(line) {
				i++
				b.WriteByte(line[i])
			}
		case '&', '|':
			op := string(c)
			if i+1 < len(line) && line[i+1] == c {
				op += string(c)
				i++
			}
			if op == "|" {
				return nil, "a pipe (|)"
			}
			cur.text = b.String()
			cmds = append(cmds, cur)
			cur = cmdCommand{op: op}
			b.Reset()
		case '(':
			if startOfCommand() {
				return nil, "a parenthesized block"
			}
			b.WriteByte(c)
		case '<':
			return nil, "input redirection (<)"
		case '>':
			r := cmdRedir{handle: 1, dup: -1}
			text := b.String()
			if n := len(text); n > 0 && (text[n-1] == '1' || text[n-1] == '2') && (n == 1 || text[n-2] == ' ' || text[n-2] == '\t') {
				r.handle = int(text[n-1] - '0')
				b.Reset()
				b.WriteString(text[:n-1])
			}
			if i+1 < len(line) && line[i+1] == '>' {
				r.append = true
				i++
			}
			if i+2 < len(line) && line[i+1] == '&' && (line[i+2] == '1' || line[i+2] == '2') {
				r.dup = int(line[i+2] - '0')
				i += 2
				cur.redirs = append(cur.redirs, r)
				continue
			}
			j := i + 1
			for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
				j++
			}
			k := j
			q := false
			for k < len(line) && (q || !strings.ContainsRune(" \t&|<>", rune(line[k]))) {
				if line[k] == '"' {
					q = !q
				}
				k++
			}
			r.file = strings.ReplaceAll(line[j:k], `"`, "")
			if r.file == "" {
				return nil, "a redirection without a file"
			}
			cur.redirs = append(cur.redirs, r)
			i = k - 1
		default:
			b.WriteByte(c)
		}
	}
	cur.text = b.String()
	cmds = append(cmds, cur)
	for _, c := range cmds {
		if strings.TrimLeft(c.text, " \t@") == "" {
			return nil, "an empty command around an operator"
		}
	}
	return cmds, ""
}

// runLine runs a /C line and returns cmd's exit code: the exit code of exit, else ERRORLEVEL
// after the last command that ran.
func (s *cmdState) runLine(line string) int {
	if strings.TrimSpace(line) == "" {
		return 0 // "cmd /c" with nothing to run
	}
	cmds, bad := parseLine(s.expandVars(line))
	if bad != "" {
		return s.unsupported(bad)
	}
	ok := true
	for i, c := range cmds {
		if i > 0 && (c.op == "&&" && !ok || c.op == "||" && ok) {
			continue // ok stays that of the last command that ran
		}
		var code int
		ok, code = s.runCommand(c)
		if code >= 0 {
			return code
		}
		if s.exit != nil {
			return *s.exit
		}
	}
	return s.errorlevel
}

// runCommand runs one command; ok says whether it succeeded (for && and ||). A code >= 0 ends
// cmd with that code (a refused command).
func (s *cmdState) runCommand(c cmdCommand) (ok bool, code int) {
	stdout, stderr := s.stdout, s.stderr
	for _, r := range c.redirs {
		var w io.Writer
		if r.dup >= 0 {
			w = map[int]io.Writer{1: stdout, 2: stderr}[r.dup]
		} else {
			flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			if r.append {
				flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
			}
			f, err := os.OpenFile(hostPath(r.file), flags, 0o644)
			if err != nil {
				fmt.Fprintf(s.stderr, "The system cannot find the path specified.\r\n")
				s.errorlevel = 1
				return false, -1
			}
			defer f.Close()
			w = f
		}
		if r.handle == 1 {
			stdout = w
		} else {
			stderr = w
		}
	}
	text := strings.TrimLeft(c.text, " \t@")
	name, rest := text, ""
	if i := strings.IndexAny(text, " \t"); i >= 0 {
		name, rest = text[:i], text[i+1:]
	}
	lname := strings.ToLower(name)
	// "echo." and "echo:" print what follows, an empty line for nothing.
	if len(lname) > 4 && strings.HasPrefix(lname, "echo") && strings.ContainsRune(".:/(", rune(lname[4])) {
		fmt.Fprintf(stdout, "%s\r\n", text[5:])
		return true, -1
	}
	fail := func(msg string) (bool, int) {
		fmt.Fprintf(stderr, "%s\r\n", msg)
		s.errorlevel = 1
		return false, -1
	}
	args := func() []string { return winargs.Split("x " + rest)[1:] }
	switch lname {
	case "rem":
		return true, -1
	case "echo":
		switch t := strings.ToLower(strings.TrimSpace(rest)); t {
		case "":
			state := "on"
			if s.echoOff {
				state = "off"
			}
			fmt.Fprintf(stdout, "ECHO is %s.\r\n", state)
		case "on", "off":
			s.echoOff = t == "off"
		default:
			fmt.Fprintf(stdout, "%s\r\n", rest)
		}
		return true, -1
	case "exit":
		a := args()
		if len(a) > 0 && strings.EqualFold(a[0], "/b") {
			a = a[1:]
		}
		// Without a number the code is ERRORLEVEL (assumption: cmd /? does not say). A
		// number that does not parse is 0, as cmd's own parser (atoi) reads it.
		n := s.errorlevel
		if len(a) > 0 {
			n = atoiPrefix(a[0])
		}
		s.exit = &n
		return true, -1
	case "type":
		a := args()
		if len(a) != 1 {
			return false, s.unsupported("type with other than one file")
		}
		p, fi, found := findFold(hostPath(a[0]))
		if !found {
			return fail("The system cannot find the file specified.")
		}
		if fi.IsDir() {
			return fail("Access is denied.")
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fail("Access is denied.")
		}
		stdout.Write(b)
		return true, -1
	case "dir":
		return s.dir(args(), stdout, stderr)
	case "set":
		return s.set(rest, stdout, stderr)
	case "mkdir", "md":
		a := args()
		if len(a) == 0 {
			return fail("The syntax of the command is incorrect.")
		}
		ok := true
		for _, d := range a {
			if _, _, exists := findFold(hostPath(d)); exists {
				fmt.Fprintf(stderr, "A subdirectory or file %s already exists.\r\n", d)
				ok = false
				continue
			}
			if err := os.MkdirAll(hostPath(d), 0o755); err != nil {
				fmt.Fprintf(stderr, "Access is denied.\r\n")
				ok = false
			}
		}
		if !ok {
			s.errorlevel = 1
		}
		return ok, -1
	}
	if cmdUnsupportedInternal[lname] {
		return false, s.unsupported("the internal command " + strings.ToUpper(name))
	}
	path, found := s.findProgram(name)
	if !found {
		fmt.Fprintf(stderr, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", strings.Trim(name, `"`))
		s.errorlevel = 9009
		return false, -1
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".bat" || ext == ".cmd" {
		return false, s.unsupported("running a batch file (" + name + ")")
	}
	// The program splits its command line with the C runtime's rules.
	code, err := s.runProgram(path, winargs.Split(text), stdout, stderr)
	if err != nil {
		return fail(fmt.Sprintf("%s: %v", name, err))
	}
	s.errorlevel = code
	return code == 0, -1
}

// atoiPrefix reads a leading (signed) decimal number, 0 if there is none.
func atoiPrefix(s string) int {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || end == 0 && (s[end] == '-' || s[end] == '+')) {
		end++
	}
	n, _ := strconv.Atoi(s[:end])
	return n
}

// set: no argument lists every variable; "set P" those whose name starts with P (ERRORLEVEL 1
// and a message when none does); "set NAME=VALUE" sets, "set NAME=" removes.
func (s *cmdState) set(rest string, stdout, stderr io.Writer) (bool, int) {
	arg := strings.TrimLeft(rest, " \t")
	if strings.HasPrefix(arg, "/") {
		return false, s.unsupported("set " + strings.Fields(arg)[0])
	}
	// set "NAME=VALUE": the quotes go, the value ends at the last quote.
	if strings.HasPrefix(arg, `"`) {
		arg = arg[1:]
		if i := strings.LastIndex(arg, `"`); i >= 0 {
			arg = arg[:i]
		}
	}
	if name, value, ok := strings.Cut(arg, "="); ok {
		if name == "" {
			fmt.Fprintf(stderr, "The syntax of the command is incorrect.\r\n")
			s.errorlevel = 1
			return false, -1
		}
		s.setenv(name, value, value == "")
		return true, -1
	}
	prefix := strings.TrimRight(arg, " \t")
	found := false
	for _, kv := range s.sortedEnv() {
		if strings.HasPrefix(strings.ToLower(kv), strings.ToLower(prefix)) {
			fmt.Fprintf(stdout, "%s\r\n", kv)
			found = true
		}
	}
	if !found {
		fmt.Fprintf(stderr, "Environment variable %s not defined\r\n", prefix)
		s.errorlevel = 1
	}
	return found, -1
}

// dir lists a folder as cmd's dir does (date, time, <DIR> or size, name; the totals), or only
// the names with /B. The volume's label and serial number lines are left out: the stand-in
// has neither.
func (s *cmdState) dir(args []string, stdout, stderr io.Writer) (bool, int) {
	bare := false
	var target string
	for _, a := range args {
		switch {
		case strings.EqualFold(a, "/b"):
			bare = true
		case strings.HasPrefix(a, "/"):
			return false, s.unsupported("dir " + a)
		case target != "":
			return false, s.unsupported("dir with more than one path")
		default:
			target = a
		}
	}
	if target == "" {
		target = "."
	}
	p, fi, found := findFold(hostPath(target))
	if !found {
		fmt.Fprintf(stderr, "File Not Found\r\n")
		s.errorlevel = 1
		return false, -1
	}
	entries := []os.FileInfo{fi}
	dirName := filepath.Dir(p)
	if fi.IsDir() {
		des, err := os.ReadDir(p)
		if err != nil {
			fmt.Fprintf(stderr, "Access is denied.\r\n")
			s.errorlevel = 1
			return false, -1
		}
		entries = entries[:0]
		for _, d := range des {
			if info, err := d.Info(); err == nil {
				entries = append(entries, info)
			}
		}
		dirName = p
	}
	if bare {
		for _, e := range entries {
			fmt.Fprintf(stdout, "%s\r\n", e.Name())
		}
		return true, -1
	}
	fmt.Fprintf(stdout, " Volume in drive C has no label.\r\n\r\n Directory of %s\r\n\r\n", winPath(dirName))
	var files, dirs int
	var bytes int64
	for _, e := range entries {
		when := e.ModTime().Format("01/02/2006  03:04 PM")
		if e.IsDir() {
			dirs++
			fmt.Fprintf(stdout, "%s    <DIR>          %s\r\n", when, e.Name())
			continue
		}
		files++
		bytes += e.Size()
		fmt.Fprintf(stdout, "%s %17s %s\r\n", when, groupDigits(e.Size()), e.Name())
	}
	fmt.Fprintf(stdout, "%16d File(s) %14s bytes\r\n", files, groupDigits(bytes))
	fmt.Fprintf(stdout, "%16d Dir(s)\r\n", dirs)
	return true, -1
}

// groupDigits writes n with thousands separators, as dir does in an English locale.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
