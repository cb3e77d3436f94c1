// Package sdkschema checks messages of the Copilot SDK protocol against the
// Copilot SDK's own generated types (the Go SDK's rpc package, vendored in
// e2e/copilotsdk), as strictly as the strictest SDKs read them: Python's and
// .NET's refuse a value outside an enum, an id that is not a UUID or a
// missing required field while reading the event stream, which Go's
// encoding/json lets through. It is for tests: the bridge's tests decode all
// of a session's traffic with it.
package sdkschema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/github/copilot-sdk/go/rpc"
	"github.com/google/uuid"
)

// results maps the methods whose answer the SDK reads into one of its rpc
// types onto that type.
var results = map[string]reflect.Type{
	"connect":                reflect.TypeFor[rpc.ConnectResult](),
	"ping":                   reflect.TypeFor[rpc.PingResult](),
	"session.send":           reflect.TypeFor[rpc.SendResult](),
	"session.log":            reflect.TypeFor[rpc.LogResult](),
	"session.abort":          reflect.TypeFor[rpc.AbortResult](),
	"session.model.switchTo": reflect.TypeFor[rpc.ModelSwitchToResult](),
	"session.permissions.handlePendingPermissionRequest": reflect.TypeFor[rpc.PermissionRequestResult](),
	"session.tools.handlePendingToolCall":                reflect.TypeFor[rpc.HandlePendingToolCallResult](),
	"session.permissions.pendingRequests":                reflect.TypeFor[rpc.PendingPermissionRequestList](),
	"session.eventLog.registerInterest":                  reflect.TypeFor[rpc.RegisterEventInterestResult](),
}

// uuidFields are the fields the schema makes UUIDs, by Go type and field.
var uuidFields = map[string]bool{
	"LogResult.EventID": true,
}

// Event checks one session event (a session.event's "event", or one of
// session.getMessages' "events").
func Event(raw []byte) error {
	var ev rpc.SessionEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("event: %w", err)
	}
	if _, unknown := ev.Data.(*rpc.RawSessionEventData); unknown || ev.Data == nil {
		return fmt.Errorf("event: type %q is not one of the schema's", ev.Type())
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	for _, k := range []string{"id", "timestamp", "type", "data", "parentId"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("event %s: no %q", ev.Type(), k)
		}
	}
	if err := isUUID(ev.ID); err != nil {
		return fmt.Errorf("event %s: id: %w", ev.Type(), err)
	}
	if ev.ParentID != nil {
		if err := isUUID(*ev.ParentID); err != nil {
			return fmt.Errorf("event %s: parentId: %w", ev.Type(), err)
		}
	}
	if err := check(reflect.ValueOf(ev.Data).Elem(), m["data"], string(ev.Type())+".data"); err != nil {
		return fmt.Errorf("event %s: %w", ev.Type(), err)
	}
	return nil
}

// Result checks the answer of a method the SDK reads into a type of its
// own; other methods' answers only need to be JSON.
func Result(method string, raw []byte) error {
	if method == "session.getMessages" {
		var r struct {
			Events []json.RawMessage `json:"events"`
		}
		if err := strictJSON(raw, &r); err != nil {
			return err
		}
		if r.Events == nil {
			return errors.New("session.getMessages: no events")
		}
		for _, e := range r.Events {
			if err := Event(e); err != nil {
				return fmt.Errorf("session.getMessages: %w", err)
			}
		}
		return nil
	}
	t, ok := results[method]
	if !ok {
		var v any
		return json.Unmarshal(raw, &v)
	}
	v := reflect.New(t)
	if err := json.Unmarshal(raw, v.Interface()); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return check(v.Elem(), raw, method)
}

func strictJSON(raw []byte, v any) error {
	return json.Unmarshal(raw, v)
}

func isUUID(s string) error {
	if len(s) != 36 {
		return fmt.Errorf("%q is not a UUID", s)
	}
	if _, err := uuid.Parse(s); err != nil {
		return fmt.Errorf("%q is not a UUID: %w", s, err)
	}
	return nil
}

var timeType = reflect.TypeFor[time.Time]()

// check walks v, decoded from raw, for what encoding/json does not check:
// required fields present, enum values known, UUIDs well formed.
func check(v reflect.Value, raw json.RawMessage, path string) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return check(v.Elem(), raw, path)
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer && !e.IsNil() {
			return check(e.Elem(), raw, path)
		}
		return nil
	case reflect.String:
		t := v.Type()
		if t.PkgPath() == rpcPath {
			vals, isEnum := enums()[t.Name()]
			if isEnum && !vals[v.String()] {
				return fmt.Errorf("%s: %q is not one of %s's values %v", path, v.String(), t.Name(), keys(vals))
			}
		}
		return nil
	case reflect.Slice:
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil // []byte and the like
		}
		for i := 0; i < v.Len() && i < len(items); i++ {
			if err := check(v.Index(i), items[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		var items map[string]json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
		for _, k := range v.MapKeys() {
			if k.Kind() != reflect.String {
				continue
			}
			if err := check(v.MapIndex(k), items[k.String()], path+"."+k.String()); err != nil {
				return err
			}
		}
		return nil
	case reflect.Struct:
		if v.Type() == timeType {
			return nil
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(raw, &fields); err != nil {
			return fmt.Errorf("%s: not an object: %w", path, err)
		}
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fraw, present := fields[name]
			optional := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero") || f.Type.Kind() == reflect.Pointer || f.Type.Kind() == reflect.Interface
			if !present || string(bytes.TrimSpace(fraw)) == "null" {
				if !optional {
					return fmt.Errorf("%s: the required field %q is missing", path, name)
				}
				continue
			}
			if uuidFields[t.Name()+"."+f.Name] {
				if err := isUUID(v.Field(i).String()); err != nil {
					return fmt.Errorf("%s.%s: %w", path, name, err)
				}
			}
			if err := check(v.Field(i), fraw, path+"."+name); err != nil {
				return err
			}
		}
		return nil
	}
	return nil
}

var rpcPath = reflect.TypeFor[rpc.AbortReason]().PkgPath()

var (
	enumOnce sync.Once
	enumSet  map[string]map[string]bool
)

// enums are the string enums of the rpc package, by type name, read from
// its generated source: Go keeps constants out of reflection.
func enums() map[string]map[string]bool {
	enumOnce.Do(func() {
		enumSet = map[string]map[string]bool{}
		_, self, _, _ := runtime.Caller(0)
		dir := filepath.Join(filepath.Dir(self), "..", "..", "..", "e2e", "copilotsdk", "go", "rpc")
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				panic(fmt.Sprintf("sdkschema: read the SDK's types: %v", err))
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					id, ok := vs.Type.(*ast.Ident)
					if !ok {
						continue
					}
					for _, val := range vs.Values {
						lit, ok := val.(*ast.BasicLit)
						if !ok || lit.Kind != token.STRING {
							continue
						}
						str, err := strconv.Unquote(lit.Value)
						if err != nil {
							continue
						}
						if enumSet[id.Name] == nil {
							enumSet[id.Name] = map[string]bool{}
						}
						enumSet[id.Name][str] = true
					}
				}
			}
		}
		if len(enumSet) == 0 {
			panic("sdkschema: no enums found in " + dir)
		}
	})
	return enumSet
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
