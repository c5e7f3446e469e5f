package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openhcs/runhcs/internal/winargs"
)

// powershell.exe's stand-in: `powershell [-NoProfile] [-NonInteractive] [-NoLogo]
// [-ExecutionPolicy P] [-Command] TEXT…` runs TEXT, statements separated by ; or new lines:
// echo/Write-Output (each argument on its own line), Write-Host, Start-Sleep (-s/-Seconds,
// -m/-Milliseconds or a number), ls/dir/gci/Get-ChildItem, cat/type/gc/Get-Content,
// Get-Process/ps/gps, exit [N], while ($true) { … } with break, $env:NAME (read, in strings
// and bare words, and assigned), $true, $false, $null and $LASTEXITCODE, 'single' and
// "double" quoted strings with ` escapes, and other programs through PATH. The exit code is
// exit's, else 1 if the last statement failed, else 0 (as powershell -Command reports it).
// Anything else is refused as not supported.

type psState struct {
	*tool
	lastExit int
	failed   bool // $? is false: the last statement failed
	exit     *int
	brk      bool // break out of the innermost loop
}

// psError ends the run with exit code 1: a statement the stand-in does not support.
type psError struct{ what string }

func psMain(args []string, t *tool) int {
	t.name = "powershell"
	var text []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(text) > 0 || !strings.HasPrefix(a, "-") {
			text = append(text, a)
			continue
		}
		p := strings.ToLower(a[1:])
		switch {
		case p == "c" || p == "command" || strings.HasPrefix("command", p) && len(p) >= 2:
			if i+1 < len(args) && args[i+1] == "-" {
				return t.unsupported("-Command - (commands from standard input)")
			}
			text = append(text, args[i+1:]...)
			i = len(args)
		case p == "nop" || strings.HasPrefix("noprofile", p) && len(p) >= 3,
			p == "noni" || strings.HasPrefix("noninteractive", p) && len(p) >= 4,
			p == "nol" || strings.HasPrefix("nologo", p) && len(p) >= 3:
		case p == "ep" || strings.HasPrefix("executionpolicy", p) && len(p) >= 2:
			i++ // no scripts are loaded: the policy has nothing to act on
		default:
			return t.unsupported("the parameter " + a)
		}
	}
	if len(text) == 0 {
		return t.unsupported("an interactive powershell (no -Command)")
	}
	s := &psState{tool: t}
	toks, err := psLex(strings.Join(text, " "))
	if err == nil {
		var stmts []psStmt
		if stmts, err = (&psParser{toks: toks}).block(false); err == nil {
			err = s.run(stmts)
		}
	}
	if err != nil {
		return t.unsupported(err.(psError).what)
	}
	switch {
	case s.exit != nil:
		return *s.exit
	case s.failed:
		return 1
	}
	return 0
}

func (e psError) Error() string { return e.what }

// psTok is a token: a word (bare, may hold $env:X), a quoted string, or punctuation.
type psTok struct {
	kind byte // 'w' word, 's' single-quoted, 'd' double-quoted, or the punctuation itself: ; { } ( ) = | & and '\n'
	text string
}

func psLex(src string) ([]psTok, error) {
	var toks []psTok
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case strings.IndexByte(";{}()=|&\n", c) >= 0:
			toks = append(toks, psTok{kind: c})
			i++
		case c == '\'':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, psError{"an unterminated string"}
				}
				if src[i] == '\'' {
					if i+1 < len(src) && src[i+1] == '\'' {
						b.WriteByte('\'')
						i += 2
						continue
					}
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			toks = append(toks, psTok{kind: 's', text: b.String()})
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, psError{"an unterminated string"}
				}
				if src[i] == '"' {
					i++
					break
				}
				if src[i] == '`' && i+1 < len(src) {
					b.WriteByte('`')
					i++
				}
				b.WriteByte(src[i])
				i++
			}
			toks = append(toks, psTok{kind: 'd', text: b.String()})
		default:
			j := i
			for j < len(src) && strings.IndexByte(" \t\r\n;{}()|&'\"#", src[j]) < 0 && !(src[j] == '=' && j > i && src[i] == '$') {
				j++
			}
			toks = append(toks, psTok{kind: 'w', text: src[i:j]})
			i = j
		}
	}
	return toks, nil
}

// psStmt is a statement: a while loop (cond, body), exit (args[0] the code, optional), break,
// an assignment to $env:NAME, or a command or expression (words).
type psStmt struct {
	kind  string // "while", "exit", "break", "assign", "cmd"
	words []psTok
	body  []psStmt
	name  string // assign: the variable
}

type psParser struct {
	toks []psTok
	i    int
}

func (p *psParser) peek() byte {
	if p.i < len(p.toks) {
		return p.toks[p.i].kind
	}
	return 0
}

func (p *psParser) expect(k byte) error {
	if p.peek() != k {
		return psError{fmt.Sprintf("this syntax (expected %q)", string(k))}
	}
	p.i++
	return nil
}

// block parses statements up to the end, or up to "}" when inner.
func (p *psParser) block(inner bool) ([]psStmt, error) {
	var out []psStmt
	for {
		switch p.peek() {
		case 0:
			if inner {
				return nil, psError{`a block without its "}"`}
			}
			return out, nil
		case '}':
			if !inner {
				return nil, psError{`an unmatched "}"`}
			}
			p.i++
			return out, nil
		case ';', '\n':
			p.i++
			continue
		}
		st, err := p.stmt()
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
}

func (p *psParser) stmt() (psStmt, error) {
	t := p.toks[p.i]
	if t.kind == 'w' {
		switch kw := strings.ToLower(t.text); kw {
		case "while":
			p.i++
			if err := p.expect('('); err != nil {
				return psStmt{}, err
			}
			if p.peek() != 'w' || !strings.EqualFold(p.toks[p.i].text, "$true") {
				return psStmt{}, psError{"a while condition other than $true"}
			}
			p.i++
			if err := p.expect(')'); err != nil {
				return psStmt{}, err
			}
			for p.peek() == '\n' {
				p.i++
			}
			if err := p.expect('{'); err != nil {
				return psStmt{}, err
			}
			body, err := p.block(true)
			return psStmt{kind: "while", body: body}, err
		case "exit", "break":
			p.i++
			st := psStmt{kind: kw}
			for p.peek() == 'w' || p.peek() == 's' || p.peek() == 'd' {
				st.words = append(st.words, p.toks[p.i])
				p.i++
			}
			if kw == "break" && len(st.words) > 0 || len(st.words) > 1 {
				return psStmt{}, psError{kw + " with these arguments"}
			}
			return st, p.end()
		case "for", "foreach", "do", "if", "switch", "function", "try", "until", "trap", "param":
			return psStmt{}, psError{"the " + kw + " statement"}
		}
		if strings.HasPrefix(strings.ToLower(t.text), "$env:") && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == '=' {
			p.i += 2
			st := psStmt{kind: "assign", name: t.text[len("$env:"):]}
			if k := p.peek(); k != 'w' && k != 's' && k != 'd' {
				return psStmt{}, psError{"this assignment"}
			}
			st.words = []psTok{p.toks[p.i]}
			p.i++
			return st, p.end()
		}
	}
	st := psStmt{kind: "cmd"}
	if t.kind == '&' { // the call operator: & 'C:\path\prog.exe' args
		p.i++
	}
	for {
		switch k := p.peek(); k {
		case 'w', 's', 'd':
			st.words = append(st.words, p.toks[p.i])
			p.i++
		case 0, ';', '\n', '}':
			if len(st.words) == 0 {
				return psStmt{}, psError{"an empty command"}
			}
			return st, nil
		case '|':
			return psStmt{}, psError{"a pipeline (|)"}
		default:
			return psStmt{}, psError{fmt.Sprintf("%q here", string(k))}
		}
	}
}

// end checks that a statement ends here.
func (p *psParser) end() error {
	switch p.peek() {
	case 0, ';', '\n', '}':
		return nil
	}
	return psError{"more after the statement"}
}

// value is a token's value: strings with their variables expanded; a bare $variable is its
// value (nil for $null and an unset $env:X).
func (s *psState) value(t psTok) (any, error) {
	switch t.kind {
	case 's':
		return t.text, nil
	case 'd':
		return s.expand(t.text, true)
	}
	w := t.text
	if strings.HasPrefix(w, "$") && !strings.ContainsAny(w[1:], "$") {
		return s.variable(w[1:])
	}
	if n, err := strconv.Atoi(w); err == nil {
		return n, nil
	}
	return s.expand(w, false)
}

func (s *psState) variable(name string) (any, error) {
	name = strings.Trim(name, "{}")
	switch l := strings.ToLower(name); {
	case strings.HasPrefix(l, "env:"):
		if v, ok := s.getenv(name[4:]); ok {
			return v, nil
		}
		return nil, nil
	case l == "true":
		return true, nil
	case l == "false":
		return false, nil
	case l == "null":
		return nil, nil
	case l == "lastexitcode":
		return s.lastExit, nil
	}
	return nil, psError{"the variable $" + name}
}

// expand replaces $env:NAME, ${env:NAME} and the other known variables in a string, and, in
// double quotes, the ` escapes.
func (s *psState) expand(str string, quoted bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(str); i++ {
		c := str[i]
		if quoted && c == '`' && i+1 < len(str) {
			i++
			b.WriteString(map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '0': "\x00", 'a': "\a"}[str[i]])
			if !strings.ContainsRune("ntr0a", rune(str[i])) {
				b.WriteByte(str[i])
			}
			continue
		}
		if c != '$' || i+1 >= len(str) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		if str[j] == '{' {
			k := strings.IndexByte(str[j:], '}')
			if k < 0 {
				return "", psError{"an unterminated ${"}
			}
			j += k + 1
		} else {
			for j < len(str) && (isLetter(str[j]) || str[j] >= '0' && str[j] <= '9' || str[j] == '_' || str[j] == ':' && strings.EqualFold(str[i+1:j], "env")) {
				j++
			}
		}
		if j == i+1 {
			b.WriteByte(c)
			continue
		}
		v, err := s.variable(str[i+1 : j])
		if err != nil {
			return "", err
		}
		if v != nil {
			fmt.Fprint(&b, psString(v))
		}
		i = j - 1
	}
	return b.String(), nil
}

// psString formats a value as PowerShell writes it.
func psString(v any) string {
	switch v := v.(type) {
	case bool:
		if v {
			return "True"
		}
		return "False"
	}
	return fmt.Sprint(v)
}

func (s *psState) run(stmts []psStmt) error {
	for _, st := range stmts {
		if s.exit != nil || s.brk {
			return nil
		}
		if err := s.runStmt(st); err != nil {
			return err
		}
	}
	return nil
}

func (s *psState) runStmt(st psStmt) error {
	switch st.kind {
	case "while":
		for s.exit == nil {
			if err := s.run(st.body); err != nil {
				return err
			}
			if s.brk {
				s.brk = false
				break
			}
		}
		return nil
	case "break":
		s.brk = true
		return nil
	case "exit":
		code := 0
		if len(st.words) == 1 {
			v, err := s.value(st.words[0])
			if err != nil {
				return err
			}
			// exit takes an integer; anything else is 0 here (assumption: PowerShell converts
			// with its own rules and fails for text that is not a number).
			switch v := v.(type) {
			case int:
				code = v
			case string:
				code, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		s.exit = &code
		return nil
	case "assign":
		v, err := s.value(st.words[0])
		if err != nil {
			return err
		}
		if v == nil || v == "" {
			s.setenv(st.name, "", true)
		} else {
			s.setenv(st.name, psString(v), false)
		}
		s.failed = false
		return nil
	}
	return s.command(st.words)
}

// command runs a cmdlet, an expression (a lone value: it is written out) or a program.
func (s *psState) command(words []psTok) error {
	first := words[0]
	if first.kind != 'w' || strings.HasPrefix(first.text, "$") || isNumber(first.text) {
		if len(words) > 1 {
			return psError{"an expression followed by more"}
		}
		v, err := s.value(first)
		if err != nil {
			return err
		}
		if v != nil {
			fmt.Fprintf(s.stdout, "%s\r\n", psString(v))
		}
		s.failed = false
		return nil
	}
	var args []any
	for _, w := range words[1:] {
		v, err := s.value(w)
		if err != nil {
			return err
		}
		args = append(args, v)
	}
	switch name := strings.ToLower(first.text); name {
	case "echo", "write", "write-output":
		for _, a := range args {
			if a != nil {
				fmt.Fprintf(s.stdout, "%s\r\n", psString(a))
			}
		}
		s.failed = false
		return nil
	case "write-host":
		var parts []string
		for _, a := range args {
			if a != nil {
				parts = append(parts, psString(a))
			}
		}
		fmt.Fprintf(s.stdout, "%s\r\n", strings.Join(parts, " "))
		s.failed = false
		return nil
	case "start-sleep", "sleep":
		return s.sleep(args)
	case "ls", "dir", "gci", "get-childitem":
		return s.list(args)
	case "cat", "type", "gc", "get-content":
		if len(args) != 1 {
			return psError{name + " with other than one path"}
		}
		p, fi, found := findFold(hostPath(psString(args[0])))
		if !found || fi.IsDir() {
			return s.cmdletError(name, fmt.Sprintf("Cannot find path '%s' because it does not exist.", psString(args[0])))
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return s.cmdletError(name, err.Error())
		}
		for _, l := range strings.SplitAfter(strings.TrimRight(string(b), "\r\n"), "\n") {
			fmt.Fprintf(s.stdout, "%s\r\n", strings.TrimRight(l, "\r\n"))
		}
		s.failed = false
		return nil
	case "get-process", "ps", "gps":
		if len(args) != 0 {
			return psError{name + " with arguments"}
		}
		return s.processes()
	}
	path, found := s.findProgram(first.text)
	if !found {
		if !strings.ContainsAny(first.text, `\/.`) && strings.Contains(first.text, "-") {
			return psError{"the cmdlet " + first.text}
		}
		fmt.Fprintf(s.stderr, "%s : The term '%s' is not recognized as the name of a cmdlet, function, script file, or operable program.\r\n", first.text, first.text)
		s.failed = true
		return nil
	}
	argv := []string{first.text}
	for _, a := range args {
		if a != nil {
			argv = append(argv, psString(a))
		}
	}
	// PowerShell 5.1 passes native programs a command line it quotes itself; the program's C
	// runtime splits it back into these arguments.
	code, err := s.runProgram(path, winargs.Split(winargs.Join(argv)), s.stdout, s.stderr)
	if err != nil {
		return s.cmdletError(first.text, err.Error())
	}
	s.lastExit = code
	s.failed = code != 0
	return nil
}

func isNumber(w string) bool { _, err := strconv.Atoi(w); return err == nil }

// cmdletError writes a non-terminating error, as a cmdlet does, and marks the statement failed.
func (s *psState) cmdletError(cmdlet, msg string) error {
	fmt.Fprintf(s.stderr, "%s : %s\r\n", cmdlet, msg)
	s.failed = true
	return nil
}

// sleep is Start-Sleep: -Seconds/-s N, -Milliseconds/-m N, or N seconds.
func (s *psState) sleep(args []any) error {
	unit := time.Second
	var n any
	for i := 0; i < len(args); i++ {
		a, isStr := args[i].(string)
		if isStr && strings.HasPrefix(a, "-") {
			p := strings.ToLower(a[1:])
			switch {
			case p == "s" || len(p) >= 1 && strings.HasPrefix("seconds", p):
				unit = time.Second
			case p == "m" || len(p) >= 1 && strings.HasPrefix("milliseconds", p):
				unit = time.Millisecond
			default:
				return psError{"Start-Sleep " + a}
			}
			continue
		}
		if n != nil {
			return psError{"Start-Sleep with more than one duration"}
		}
		n = args[i]
	}
	var d float64
	switch v := n.(type) {
	case int:
		d = float64(v)
	case string:
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return s.cmdletError("Start-Sleep", fmt.Sprintf("Cannot bind parameter. Cannot convert value %q to type System.Int32.", v))
		}
		d = f
	default:
		return psError{"Start-Sleep without a duration"}
	}
	time.Sleep(time.Duration(d * float64(unit)))
	s.failed = false
	return nil
}

// list is Get-ChildItem of one folder (the current one by default), in PowerShell's table.
func (s *psState) list(args []any) error {
	target := "."
	if len(args) > 1 {
		return psError{"Get-ChildItem with more than one argument"}
	}
	if len(args) == 1 {
		if a := psString(args[0]); strings.HasPrefix(a, "-") {
			return psError{"Get-ChildItem " + a}
		} else {
			target = a
		}
	}
	p, fi, found := findFold(hostPath(target))
	if !found {
		return s.cmdletError("Get-ChildItem", fmt.Sprintf("Cannot find path '%s' because it does not exist.", target))
	}
	infos := []os.FileInfo{fi}
	dir := p
	if fi.IsDir() {
		des, err := os.ReadDir(p)
		if err != nil {
			return s.cmdletError("Get-ChildItem", err.Error())
		}
		infos = infos[:0]
		for _, d := range des {
			if info, err := d.Info(); err == nil {
				infos = append(infos, info)
			}
		}
	} else {
		dir = p[:max(strings.LastIndexByte(p, '/'), 0)]
	}
	if len(infos) == 0 {
		return nil
	}
	w := s.stdout
	fmt.Fprintf(w, "\r\n\r\n    Directory: %s\r\n\r\n\r\n", winPath(dir))
	fmt.Fprintf(w, "%-20s %25s %14s %s\r\n", "Mode", "LastWriteTime", "Length", "Name")
	fmt.Fprintf(w, "%-20s %25s %14s %s\r\n", "----", "-------------", "------", "----")
	for _, e := range infos {
		mode, size := "-a----", strconv.FormatInt(e.Size(), 10)
		if e.IsDir() {
			mode, size = "d-----", ""
		}
		fmt.Fprintf(w, "%-20s %25s %14s %s\r\n", mode, e.ModTime().Format("1/2/2006   3:04 PM"), size, e.Name())
	}
	fmt.Fprint(w, "\r\n\r\n")
	s.failed = false
	return nil
}

// processes is Get-Process: Windows PowerShell 5.1's default table (Handles, NPM(K), PM(K),
// WS(K), CPU(s), Id, SI, ProcessName, with its column widths), the name without ".exe" as
// PowerShell shows it, sorted by name. What Linux has no counterpart for is shown as a Windows
// process without it would: NPM(K), the nonpaged pool, is 0 (Linux has no pageable/nonpaged
// split for a process); Handles is blank where the account may not read another process's
// descriptors (Windows shows every process's count).
func (s *psState) processes() error {
	procs, err := listProcesses()
	if err != nil {
		return s.cmdletError("Get-Process", err.Error())
	}
	for i, p := range procs {
		name := p.name[strings.LastIndexAny(p.name, `\/`)+1:]
		if len(name) > 4 && strings.EqualFold(name[len(name)-4:], ".exe") {
			name = name[:len(name)-4]
		}
		procs[i].name = name
	}
	sortProcs(procs)
	fmt.Fprint(s.stdout, "\r\nHandles  NPM(K)    PM(K)      WS(K)     CPU(s)     Id  SI ProcessName\r\n"+
		"-------  ------    -----      -----     ------     --  -- -----------\r\n")
	for _, p := range procs {
		handles := ""
		if p.handles >= 0 {
			handles = strconv.Itoa(p.handles)
		}
		fmt.Fprintf(s.stdout, "%7s %7d %8d %10d %10.2f %6d %3d %s\r\n", handles, 0, p.pm>>10, p.ws>>10, p.cpu, p.pid, p.sid, p.name)
	}
	fmt.Fprint(s.stdout, "\r\n")
	s.failed = false
	return nil
}
