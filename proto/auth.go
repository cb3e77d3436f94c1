package proto

// Error codes of contract v1.2 section 9.
const (
	// CodeForbidden: the token's role does not allow the request.
	CodeForbidden = "forbidden"
	// CodeRateLimited: the token sent more requests than its rate allows.
	CodeRateLimited = "rate_limited"
)

// Roles a token may have, each allowing what the one before allows.
const (
	RoleViewer = "viewer"
	RoleMember = "member"
	RoleOwner  = "owner"
)

// OwnerTokenName names the data dir's token.
const OwnerTokenName = "owner"

// Token is a person's token as the API shows it: never its secret.
type Token struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Role       string `json:"role"`
	CreatedAt  Time   `json:"created_at"`
	ExpiresAt  *Time  `json:"expires_at,omitempty"`
	LastUsedAt *Time  `json:"last_used_at,omitempty"`
}

// TokenList is GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// CreateTokenRequest is POST /v1/tokens.
type CreateTokenRequest struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// ExpiresIn is a Go duration ("720h"); empty for never.
	ExpiresIn string `json:"expires_in,omitempty"`
}

// TokenCreated is the answer to POST /v1/tokens: the only time the secret
// is ever shown.
type TokenCreated struct {
	Token  Token  `json:"token"`
	Secret string `json:"secret"`
}

// Me is GET /v1/me.
type Me struct {
	TokenID string `json:"token_id"`
	Name    string `json:"name"`
	Role    string `json:"role"`
	// WorkspaceRoots are the directories members may open workspaces in
	// (the server configuration's workspace_roots; section 9). Owners open
	// any directory but the data dir.
	WorkspaceRoots []string `json:"workspace_roots"`
}

// Actor names the person whose request caused an event.
type Actor struct {
	TokenID  string `json:"token_id"`
	Name     string `json:"name"`
	ClientID string `json:"client_id,omitempty"`
}

// Author names the person who wrote a user message.
type Author struct {
	Name     string `json:"name"`
	ClientID string `json:"client_id,omitempty"`
}

// AttachedClient is one entry of a workspace's attached list.
type AttachedClient struct {
	ClientID string `json:"client_id"`
	Name     string `json:"name"`
	Since    Time   `json:"since"`
}

// AuditEntry is one line of GET /v1/audit.
type AuditEntry struct {
	ID          int64  `json:"id"`
	Time        Time   `json:"time"`
	TokenID     string `json:"token_id"`
	Name        string `json:"name"`
	ClientID    string `json:"client_id,omitempty"`
	Action      string `json:"action"`
	WorkspaceID string `json:"workspace_id,omitempty"`
	SessionID   string `json:"session_id,omitempty"`
	RunID       string `json:"run_id,omitempty"`
	Detail      string `json:"detail"`
}

// AuditLog is GET /v1/audit.
type AuditLog struct {
	Entries []AuditEntry `json:"entries"`
}

// SignInCode is the body of POST /v1/signin-codes' answer: a one-time code
// that POST /v1/signin exchanges, once, before ExpiresAt, for the token
// that asked for it. It stands in for the token in a link to the web app.
type SignInCode struct {
	Code      string `json:"code"`
	ExpiresAt Time   `json:"expires_at"`
}

// SignInRequest is the body of POST /v1/signin.
type SignInRequest struct {
	Code string `json:"code"`
}

// SignIn is POST /v1/signin's answer: the token the code stood for.
type SignIn struct {
	Token string `json:"token"`
}
