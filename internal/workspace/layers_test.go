package workspace

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The domain knows no HTTP: the hub and the workspaces write streams to a
// hub.Sink, and the HTTP layer (httpapi/sse) adapts a response to it.
func TestStreamsKnowNoHTTP(t *testing.T) {
	for _, dir := range []string{".", "../hub"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		if len(files) == 0 {
			t.Fatalf("no Go files in %s", dir)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range parsed.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if strings.HasPrefix(path, "net/http") {
					t.Errorf("%s imports %s", f, path)
				}
			}
		}
	}
}
