package main

import (
	"flag"
	"fmt"
)

// compactCommand is tandem compact: a compaction run of the current
// directory's last session (or --session), followed to its end as tandem
// run follows a prompt's.
func compactCommand(args []string, env *cliEnv) int {
	o, err := parseCompact(args, env)
	if err != nil {
		return usageError(env, "compact", err)
	}
	r := &runner{o: o, env: env, perms: map[string]string{}}
	return r.main()
}

func parseCompact(args []string, env *cliEnv) (runOptions, error) {
	o := runOptions{compact: true}
	fs := flag.NewFlagSet("compact", flag.ContinueOnError)
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: tandem compact [flags]

Compacts the conversation of the current directory's workspace's last
session (or --session): the model summarizes it, and later requests carry
the summary in place of what it covers, so they fit the model's context
window again. The history keeps every message. The compaction queues
behind the session's runs like a prompt. Exit status: 0 when it is done,
130 when it was canceled (Ctrl-C), 1 on error (compaction_failed: the
conversation is left as it was).

flags:
`)
		fs.PrintDefaults()
	}
	o.register(fs, env.getenv, "print the session's event envelopes, one JSON object per line")
	fs.StringVar(&o.session, "session", "", "compact this session instead of the last one")
	if err := parseNoArgs(fs, args); err != nil {
		return o, err
	}
	return o, nil
}
