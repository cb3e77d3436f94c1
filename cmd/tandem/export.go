package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tandem-dev/tandem/proto"
)

// maxImportFile bounds the document tandem import reads: the server's
// default body limit.
const maxImportFile = 16 << 20

// exportCommand is tandem export [FILE]: the current directory's last
// session (or --session) as a tandem.session.v1 document, to FILE or
// stdout.
func exportCommand(args []string, env *cliEnv) int {
	var o clientOptions
	var sid string
	fs := newListFlags("export", "Arguments: [FILE]\n\nWrites the current directory's last session (or --session) as a\ntandem.session.v1 document to FILE, or to stdout; `tandem import` reads it\non this server or another.", env)
	o.register(fs, env.getenv, "(no effect: the document is JSON)")
	fs.StringVar(&sid, "session", "", "export this session instead of the last one")
	rest, err := parseArgs(fs, args)
	if err == nil && len(rest) > 1 {
		err = fmt.Errorf("at most one FILE, got %d arguments", len(rest))
	}
	if err != nil {
		return usageError(env, "export", err)
	}
	ctx := context.Background()
	b, ws, err := o.currentWorkspace(ctx, env)
	if err != nil {
		return fail(env, "export", err)
	}
	defer b.Close()
	if sid == "" {
		last, ok, err := b.c.LastSession(ctx, ws.ID)
		if err != nil {
			return fail(env, "export", explain(err))
		}
		if !ok {
			return fail(env, "export", fmt.Errorf("the workspace of %s has no session", ws.Path))
		}
		sid = last
	}
	doc, err := b.c.ExportSession(ctx, ws.ID, sid)
	if err != nil {
		return fail(env, "export", explain(err))
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fail(env, "export", err)
	}
	out = append(out, '\n')
	if len(rest) == 0 || rest[0] == "-" {
		_, err = env.stdout.Write(out)
	} else {
		err = os.WriteFile(rest[0], out, 0o600)
	}
	if err != nil {
		return fail(env, "export", err)
	}
	return exitOK
}

// importCommand is tandem import FILE: a new session of the current
// directory's workspace from an exported document; it prints its id.
func importCommand(args []string, env *cliEnv) int {
	var o clientOptions
	fs := newListFlags("import", "Arguments: FILE\n\nMakes a new session of the current directory's workspace from a document\n`tandem export` wrote (FILE, or - for stdin), and prints its id.", env)
	o.register(fs, env.getenv, "print the new session as JSON")
	rest, err := parseArgs(fs, args)
	if err == nil && len(rest) != 1 {
		err = errors.New("import needs exactly one FILE (- for stdin)")
	}
	if err != nil {
		return usageError(env, "import", err)
	}
	var r io.Reader = env.stdin
	if rest[0] != "-" {
		f, err := os.Open(rest[0])
		if err != nil {
			return fail(env, "import", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxImportFile+1))
	if err == nil && len(data) > maxImportFile {
		err = fmt.Errorf("%s is over %d MiB", rest[0], maxImportFile>>20)
	}
	if err != nil {
		return fail(env, "import", err)
	}
	var doc proto.Export
	if err := json.Unmarshal(data, &doc); err != nil {
		return fail(env, "import", fmt.Errorf("%s is not a session document: %w", rest[0], err))
	}
	ctx := context.Background()
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return fail(env, "import", err)
	}
	defer b.Close()
	dir, err := currentDir(env)
	if err != nil {
		return fail(env, "import", err)
	}
	ws, _, err := b.c.CreateWorkspace(ctx, dir)
	if err != nil {
		return fail(env, "import", explain(err))
	}
	sess, err := b.c.ImportSession(ctx, ws.ID, doc)
	if err != nil {
		return fail(env, "import", explain(err))
	}
	if o.json {
		return printJSON(env.stdout, sess)
	}
	fmt.Fprintln(env.stdout, sess.ID)
	return exitOK
}

// currentWorkspace connects and finds the current directory's workspace,
// which must exist.
func (o clientOptions) currentWorkspace(ctx context.Context, env *cliEnv) (*backend, proto.Workspace, error) {
	b, err := o.connect(ctx, env, true)
	if err != nil {
		return nil, proto.Workspace{}, err
	}
	dir, err := currentDir(env)
	if err == nil {
		var ws proto.Workspace
		var ok bool
		if ws, ok, err = findWorkspace(ctx, b.c, dir); err == nil && !ok {
			err = fmt.Errorf("no workspace for %s yet (tandem run makes one)", dir)
		}
		if err == nil {
			return b, ws, nil
		}
	}
	b.Close()
	return nil, proto.Workspace{}, err
}
