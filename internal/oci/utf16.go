package oci

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/containerd/errdefs"
)

// Windows strings are UTF-16. A JSON document (a spec, an exec's process) can hold strings that
// have no UTF-16 form: bytes that are not UTF-8, and \uD800-\uDFFF escapes that are not a
// high-low pair. encoding/json does not refuse them, it replaces them with U+FFFD, so a
// container would silently run with an argument, a variable or a folder other than the one
// asked for. CheckUTF16 refuses them before decoding, naming the field.

// CheckUTF16 returns an InvalidArgument error naming the first string (key or value) of the
// JSON document doc that cannot be encoded as UTF-16, by its path (process.args[1],
// process.env[0], annotations["key"]). A document that is not JSON passes: the decoder that
// follows names that error.
func CheckUTF16(doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	type level struct {
		array bool
		index int
		key   string
		inKey bool // in an object: the next string is a key
	}
	var stack []*level
	path := func() string {
		var b strings.Builder
		for i, l := range stack {
			switch {
			case l.array:
				fmt.Fprintf(&b, "[%d]", l.index)
			case i > 0 && !isIdent(l.key):
				fmt.Fprintf(&b, "[%s]", strconv.Quote(l.key))
			default:
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(l.key)
			}
		}
		return b.String()
	}
	// after is called once a value ended: the parent moves on.
	after := func() {
		if len(stack) == 0 {
			return
		}
		if top := stack[len(stack)-1]; top.array {
			top.index++
		} else {
			top.inKey = true
		}
	}
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return nil
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &level{inKey: true})
			case '[':
				stack = append(stack, &level{array: true})
			default:
				stack = stack[:len(stack)-1]
				after()
			}
		case string:
			// The raw text of the token: from the end of the previous one, past the
			// separators (ASCII, so they never make the text invalid).
			raw := doc[start:dec.InputOffset()]
			isKey := len(stack) > 0 && !stack[len(stack)-1].array && stack[len(stack)-1].inKey
			if isKey {
				stack[len(stack)-1].key = v
				stack[len(stack)-1].inKey = false
			}
			if why := notUTF16(raw); why != "" {
				where := path()
				if isKey {
					where = fmt.Sprintf("a key of %s (%q)", orRoot(path()), v)
				}
				return fmt.Errorf("%s: %s: it cannot be encoded as UTF-16 for Windows: %w", orRoot(where), why, errdefs.ErrInvalidArgument)
			}
			if !isKey {
				after()
			}
		default:
			after()
		}
	}
}

func orRoot(p string) string {
	if p == "" {
		return "the document"
	}
	return p
}

// isIdent reports whether a key reads well after a dot (process.args), else it is quoted in
// brackets (annotations["io.microsoft.container.memory.sizeinmb"]).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// notUTF16 says why the raw JSON text of a string token cannot be encoded as UTF-16, or "".
func notUTF16(raw []byte) string {
	if !utf8.Valid(raw) {
		for i := 0; i < len(raw); {
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n <= 1 {
				return fmt.Sprintf("byte %#02x is not UTF-8", raw[i])
			}
			i += n
		}
	}
	// Escapes: a \uD800-\uDBFF must be followed by a \uDC00-\uDFFF, and a low one must follow
	// a high one.
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' || i+1 >= len(raw) {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // \" \\ \n …: skip the escaped character
			continue
		}
		r, ok := hex4(raw[i+2:])
		if !ok {
			return "" // not JSON; the decoder says so
		}
		switch {
		case utf16.IsSurrogate(rune(r)) && r < 0xDC00:
			lo, ok := uint16(0), false
			if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				lo, ok = hex4(raw[i+8:])
			}
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Sprintf(`\u%04X is a high surrogate without its low half`, r)
			}
			i += 11
		case utf16.IsSurrogate(rune(r)):
			return fmt.Sprintf(`\u%04X is a low surrogate without its high half`, r)
		default:
			i += 5
		}
	}
	return ""
}

func hex4(b []byte) (uint16, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 16)
	if err != nil {
		return 0, false
	}
	return uint16(n), true
}
