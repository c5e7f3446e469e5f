package winargs

// Split splits a Windows command line into arguments with the rules of
// CommandLineToArgvW (shell32), which is how a Windows program's C runtime sees its argv:
//
//   - The first argument, the program name, ends at the first space or tab; if it begins with a
//     quote it is everything up to the next quote, and backslashes in it are literal.
//   - Later arguments are separated by spaces and tabs outside quotes.
//   - 2n backslashes followed by a quote give n backslashes, and the quote opens or closes a
//     quoted part; 2n+1 backslashes followed by a quote give n backslashes and a literal quote;
//     backslashes not followed by a quote are literal.
//   - Inside a quoted part, two quotes in a row give one literal quote and end the quoted part
//     (the "pre-2008" rule CommandLineToArgvW keeps).
//
// Sources: the CommandLineToArgvW reference
// (https://learn.microsoft.com/windows/win32/api/shellapi/nf-shellapi-commandlinetoargvw) for
// the backslash rules, and David Deley's "How Command Line Parameters Are Parsed" (sections 5.2
// and 5.4) for the program name and the double-quote rule, which are undocumented.
// A command line that is empty or only whitespace has no arguments (CommandLineToArgvW would
// return the calling program's own path, which has no meaning here).
func Split(cmd string) []string {
	var args []string
	i := 0
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' }

	allSpace := true
	for j := 0; j < len(cmd); j++ {
		if !isSpace(cmd[j]) {
			allSpace = false
			break
		}
	}
	if allSpace {
		return nil
	}

	// The program name.
	if cmd[0] == '"' {
		j := 1
		for j < len(cmd) && cmd[j] != '"' {
			j++
		}
		args = append(args, cmd[1:j])
		i = j
		if i < len(cmd) {
			i++ // the closing quote
		}
	} else {
		j := 0
		for j < len(cmd) && !isSpace(cmd[j]) {
			j++
		}
		args = append(args, cmd[:j])
		i = j
	}

	for {
		for i < len(cmd) && isSpace(cmd[i]) {
			i++
		}
		if i >= len(cmd) {
			return args
		}
		var b []byte
		inQuote := false
		for i < len(cmd) {
			c := cmd[i]
			if isSpace(c) && !inQuote {
				break
			}
			switch c {
			case '\\':
				n := 0
				for i < len(cmd) && cmd[i] == '\\' {
					n++
					i++
				}
				if i < len(cmd) && cmd[i] == '"' {
					for k := 0; k < n/2; k++ {
						b = append(b, '\\')
					}
					if n%2 == 1 {
						b = append(b, '"')
						i++
					}
					// An even count leaves the quote to the next round, where it toggles.
				} else {
					for k := 0; k < n; k++ {
						b = append(b, '\\')
					}
				}
			case '"':
				i++
				if inQuote && i < len(cmd) && cmd[i] == '"' {
					b = append(b, '"')
					i++
				}
				inQuote = !inQuote
			default:
				b = append(b, c)
				i++
			}
		}
		args = append(args, string(b))
	}
}
