// Package auth is who may do what on a Tandem server (contract section 9):
// people's tokens and their roles, the role each action needs, per-token
// rate limits, the streams a revoked token must end, and the audit log.
//
// The decision itself is Check, over a table of actions: every transport
// (the HTTP API's middleware, a Copilot protocol bridge) names the actions a
// request takes and asks Check, so that what a role may do is written once.
package auth

import (
	"context"
	"fmt"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/proto"
)

// Role is what a token allows; each role allows what the one before does.
type Role int8

// Roles, in order.
const (
	RoleNone Role = iota
	Viewer
	Member
	Owner
)

// ParseRole reads a role's name.
func ParseRole(s string) (Role, bool) {
	switch s {
	case proto.RoleViewer:
		return Viewer, true
	case proto.RoleMember:
		return Member, true
	case proto.RoleOwner:
		return Owner, true
	}
	return RoleNone, false
}

func (r Role) String() string {
	switch r {
	case Viewer:
		return proto.RoleViewer
	case Member:
		return proto.RoleMember
	case Owner:
		return proto.RoleOwner
	}
	return "none"
}

// Action is something a request does, as the audit log names it where it
// keeps it.
type Action string

// Actions. Those the contract's audit list names are audited (Audited).
const (
	// Read is every GET but tokens and audit, and the event stream.
	Read Action = "read"

	WorkspaceOpen    Action = "workspace.open"
	WorkspaceDelete  Action = "workspace.delete"
	SessionCreate    Action = "session.create"
	SessionUpdate    Action = "session.update"
	SessionDelete    Action = "session.delete"
	SessionResume    Action = "session.resume"
	SessionLog       Action = "session.log"
	SessionFork      Action = "session.fork"
	SessionImport    Action = "session.import"
	SessionRewind    Action = "session.rewind"
	Prompt           Action = "prompt"
	Steer            Action = "steer"
	Cancel           Action = "cancel"
	Compact          Action = "compact"
	PermissionAnswer Action = "permission.answer"
	ToolAnswer       Action = "tool.answer"
	TokenList        Action = "token.list"
	TokenCreate      Action = "token.create"
	TokenRevoke      Action = "token.revoke"
	AuditRead        Action = "audit.read"
	Me               Action = "me"

	// What widens what the agent may do without asking: owner only.
	AllowAll       Action = "session.allow_all"
	MCPServers     Action = "session.mcp_servers"
	AllowAllTools  Action = "session.allow_all_tools"
	SandboxWiden   Action = "session.sandbox_widen"
	Denied         Action = "auth.denied" // the audit entry of a 401 or 403
	unknownActionS        = "an action this server does not know"
)

// policy is the role each action needs, and how a refusal names it.
var policy = map[Action]struct {
	min  Role
	what string
	// audited: the contract's audit list names it.
	audited bool
}{
	Me:               {Viewer, "ask who it is", false},
	Read:             {Viewer, "read", false},
	WorkspaceOpen:    {Member, "open workspaces", true},
	SessionCreate:    {Member, "create sessions", true},
	SessionUpdate:    {Member, "update sessions", true},
	SessionResume:    {Member, "resume sessions", false},
	SessionLog:       {Member, "log to sessions", false},
	SessionFork:      {Member, "fork sessions", false},
	SessionImport:    {Member, "import sessions", false},
	SessionRewind:    {Member, "rewind sessions", false},
	Prompt:           {Member, "prompt", true},
	Steer:            {Member, "steer", true},
	Cancel:           {Member, "cancel runs", true},
	Compact:          {Member, "compact sessions", true},
	PermissionAnswer: {Member, "answer permission requests", true},
	ToolAnswer:       {Member, "answer tool calls", true},
	WorkspaceDelete:  {Owner, "delete workspaces", true},
	SessionDelete:    {Owner, "delete sessions", true},
	TokenList:        {Owner, "list tokens", false},
	TokenCreate:      {Owner, "create tokens", true},
	TokenRevoke:      {Owner, "revoke tokens", true},
	AuditRead:        {Owner, "read the audit log", false},
	AllowAll:         {Owner, `set permission_mode "allow_all"`, false},
	MCPServers:       {Owner, "give sessions MCP servers", false},
	AllowAllTools:    {Owner, `change the tools of an "allow_all" session`, false},
	SandboxWiden:     {Owner, "widen what the agent's commands may touch (sandbox, sandbox_network, sandbox_read, sandbox_write)", false},
}

// MinRole returns the role an action needs; an action the table does not
// know needs Owner (ok false), so that forgetting one fails closed.
func MinRole(a Action) (r Role, ok bool) {
	p, ok := policy[a]
	if !ok {
		return Owner, false
	}
	return p.min, true
}

// Known reports whether the policy table gives a a role.
func Known(a Action) bool {
	_, ok := policy[a]
	return ok
}

// Audited reports whether the audit log keeps a's requests.
func Audited(a Action) bool { return policy[a].audited }

// Check returns nil when role may take a, else a forbidden error naming the
// role and what it may not do.
func Check(role Role, a Action) error {
	min, _ := MinRole(a)
	if role >= min {
		return nil
	}
	what := unknownActionS
	if p, ok := policy[a]; ok {
		what = p.what
	}
	return apierr.Errorf(proto.CodeForbidden, "role %s may not %s (it needs the %s role)", role, what, min)
}

// ErrUnauthorized is the answer to a missing or wrong token.
func errUnauthorized(format string, args ...any) error {
	return apierr.Errorf(proto.CodeUnauthorized, "%s", fmt.Sprintf(format, args...))
}

// CheckContext is Check for the identity ctx carries (WithIdentity), for a
// transport that calls the domain directly (a Copilot protocol bridge): it
// authenticates its peer once, puts the identity in the context of each
// call, and asks here before acting. A context without one is refused.
func CheckContext(ctx context.Context, a Action) error {
	id, ok := FromContext(ctx)
	if !ok {
		return errUnauthorized("no identity: the request was not authenticated")
	}
	return Check(id.Role, a)
}
