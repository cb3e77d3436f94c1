package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxDepth bounds nesting while a file is read. The schema is four levels
// deep; anything much deeper is wrong, and bounding it keeps a hostile file
// from costing stack.
const maxDepth = 32

// node is a JSON value with where it starts in the file, so that an error
// can give a line and column. Object members keep their order and their
// duplicates, which encoding/json would silently drop.
type node struct {
	kind    byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	off     int
	str     string
	num     json.Number
	boolean bool
	members []member
	elems   []*node
}

type member struct {
	key    string
	keyOff int
	val    *node
}

func (n *node) kindName() string {
	switch n.kind {
	case 'o':
		return "an object"
	case 'a':
		return "an array"
	case 's':
		return "a string"
	case 'n':
		return "a number"
	case 'b':
		return "a boolean"
	}
	return "null"
}

// syntaxError is a file that is not one JSON value.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

// parseTree reads data as exactly one JSON value.
func parseTree(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	p := &treeParser{dec: dec, data: data}
	n, err := p.value(0)
	if err != nil {
		return nil, err
	}
	// Anything after the value is an error: a second object is a common
	// result of a bad merge by hand.
	off := p.start()
	if _, err := dec.Token(); err != io.EOF {
		return nil, &syntaxError{off, "unexpected content after the top-level value"}
	}
	return n, nil
}

type treeParser struct {
	dec  *json.Decoder
	data []byte
}

// start is where the next token begins: after white space and the
// separators the decoder has not consumed as tokens.
func (p *treeParser) start() int {
	off := int(p.dec.InputOffset())
	for off < len(p.data) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (p *treeParser) token() (json.Token, int, error) {
	off := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, int(se.Offset), &syntaxError{int(se.Offset), "invalid JSON: " + se.Error()}
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, len(p.data), &syntaxError{len(p.data), "invalid JSON: unexpected end of file"}
		}
		return nil, off, &syntaxError{off, "invalid JSON: " + err.Error()}
	}
	return tok, off, nil
}

func (p *treeParser) value(depth int) (*node, error) {
	tok, off, err := p.token()
	if err != nil {
		return nil, err
	}
	return p.fromToken(tok, off, depth)
}

func (p *treeParser) fromToken(tok json.Token, off, depth int) (*node, error) {
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			return nil, &syntaxError{off, fmt.Sprintf("nested more than %d levels deep", maxDepth)}
		}
		switch t {
		case '{':
			n := &node{kind: 'o', off: off}
			for p.dec.More() {
				ktok, koff, err := p.token()
				if err != nil {
					return nil, err
				}
				key, ok := ktok.(string)
				if !ok {
					return nil, &syntaxError{koff, "invalid JSON: object key is not a string"}
				}
				val, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.members = append(n.members, member{key: key, keyOff: koff, val: val})
			}
			if _, _, err := p.token(); err != nil { // '}'
				return nil, err
			}
			return n, nil
		case '[':
			n := &node{kind: 'a', off: off}
			for p.dec.More() {
				val, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.elems = append(n.elems, val)
			}
			if _, _, err := p.token(); err != nil { // ']'
				return nil, err
			}
			return n, nil
		}
		return nil, &syntaxError{off, fmt.Sprintf("invalid JSON: unexpected %q", rune(t))}
	case string:
		return &node{kind: 's', off: off, str: t}, nil
	case json.Number:
		return &node{kind: 'n', off: off, num: t}, nil
	case bool:
		return &node{kind: 'b', off: off, boolean: t}, nil
	case nil:
		return &node{kind: 'z', off: off}, nil
	}
	return nil, &syntaxError{off, fmt.Sprintf("invalid JSON: unexpected token %v", tok)}
}

// lineCol turns a byte offset into a 1-based line and column (in bytes).
func lineCol(data []byte, off int) (line, col int) {
	if off > len(data) {
		off = len(data)
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = off - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// quote shows a value from the file in a message, bounded so that a long or
// odd value cannot flood the message.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q…", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// keyPath appends a member name to a JSON path: a dotted name when it is a
// plain word, a quoted index otherwise (models["openai/gpt-4.1"]).
func keyPath(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			plain = false
			break
		}
	}
	switch {
	case plain && path == "":
		return key
	case plain:
		return path + "." + key
	}
	return path + "[" + strings.TrimSpace(quote(key)) + "]"
}

func indexPath(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }
