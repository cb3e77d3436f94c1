package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tandem-dev/tandem/proto"
)

// Me says whose token the client sends: its person's name and role.
func (c *Client) Me(ctx context.Context) (proto.Me, error) {
	var out proto.Me
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("me"), out: &out, auth: true})
	return out, err
}

// ListTokens lists the live tokens (owner only), never their secrets.
func (c *Client) ListTokens(ctx context.Context) ([]proto.Token, error) {
	var out proto.TokenList
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("tokens"), out: &out, auth: true})
	return out.Tokens, err
}

// CreateToken makes a token for a person (owner only); the answer holds its
// secret, which the server never shows again.
func (c *Client) CreateToken(ctx context.Context, req proto.CreateTokenRequest) (proto.TokenCreated, error) {
	var out proto.TokenCreated
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("tokens"), in: req, out: &out, auth: true})
	return out, err
}

// RevokeToken revokes a token by id, or by its person's name (owner only):
// its next request is refused and its streams end.
func (c *Client) RevokeToken(ctx context.Context, tokenID string) error {
	_, err := c.do(ctx, call{method: http.MethodDelete, path: path("tokens", tokenID), auth: true})
	return err
}

// Audit returns at most limit entries of the audit log after the entry with
// id after, oldest first (owner only); limit 0 is the server's default.
func (c *Client) Audit(ctx context.Context, after int64, limit int) ([]proto.AuditEntry, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out proto.AuditLog
	_, err := c.do(ctx, call{method: http.MethodGet, path: path("audit"), query: q, out: &out, auth: true})
	return out.Entries, err
}

// SignInCode asks for a one-time code standing for the client's token: a
// link to the web app can carry it (/#code=CODE) instead of the token. It
// is exchanged once, within a minute (SignIn).
func (c *Client) SignInCode(ctx context.Context) (proto.SignInCode, error) {
	var out proto.SignInCode
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("signin-codes"), in: struct{}{}, out: &out, auth: true})
	return out, err
}

// SignIn exchanges a one-time code for the token it stands for; it needs
// no token of its own.
func (c *Client) SignIn(ctx context.Context, code string) (string, error) {
	var out proto.SignIn
	_, err := c.do(ctx, call{method: http.MethodPost, path: path("signin"), in: proto.SignInRequest{Code: code}, out: &out})
	return out.Token, err
}
