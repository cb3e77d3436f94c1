package tui

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/tandem-dev/tandem/proto"
)

// exportTo writes an export document to name, a path the person typed
// (relative to the current directory). It never replaces an existing file
// unless overwrite (/export!) says so; the file is the person's own and
// may hold the conversation, so it is readable by them only.
func exportTo(name string, doc proto.Export, overwrite bool) doneMsg {
	what := "export to " + name
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return doneMsg{what: what, err: err}
	}
	flag := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if overwrite {
		flag = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(name, flag, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return doneMsg{what: what, err: fmt.Errorf("%s exists; /export! %s overwrites it", name, name)}
	}
	if err != nil {
		return doneMsg{what: what, err: err}
	}
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return doneMsg{what: what, err: err}
	}
	return doneMsg{what: fmt.Sprintf("exported %d messages to %s", len(doc.Messages), name)}
}
