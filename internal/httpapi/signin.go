package httpapi

// One-time sign-in codes over HTTP (see package signin): a client with a
// token asks for a code; a browser page exchanges it, once, for the token.

import (
	"net"
	"net/http"
	"sync"

	"golang.org/x/time/rate"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/auth"
	"github.com/tandem-dev/tandem/internal/signin"
	"github.com/tandem-dev/tandem/proto"
)

// The exchange needs no token, so it is limited per client address: a
// page makes one exchange; a guesser gets a few a second (and a code has
// 128 bits).
const (
	signinRate  = 2
	signinBurst = 10
	// maxSigninPeers bounds the addresses whose limits are kept.
	maxSigninPeers = 4096
)

// signinLimits are the exchange's per-address limiters.
type signinLimits struct {
	mu    sync.Mutex
	peers map[string]*rate.Limiter
}

func (l *signinLimits) allow(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.peers == nil || len(l.peers) >= maxSigninPeers {
		l.peers = map[string]*rate.Limiter{}
	}
	lim := l.peers[host]
	if lim == nil {
		lim = rate.NewLimiter(signinRate, signinBurst)
		l.peers[host] = lim
	}
	return lim.Allow()
}

// issueSigninCode is POST /v1/signin-codes: a code for the request's own
// token, whatever its role.
func (a *API) issueSigninCode(w http.ResponseWriter, r *http.Request) {
	var empty struct{}
	if !a.Decode(w, r, &empty) {
		return
	}
	secret, _ := auth.ParseBearer(r.Header.Get("Authorization"))
	code, expires, err := a.signin.Issue(secret)
	if err != nil {
		a.writeError(w, r, apierr.Errorf(proto.CodeRateLimited, "%v", err))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, proto.SignInCode{Code: code, ExpiresAt: proto.Time{Time: expires}})
}

// signIn is POST /v1/signin: the code's token, once. No token needed; the
// code is in the body, never in the URL, so no log holds it.
func (a *API) signIn(w http.ResponseWriter, r *http.Request) {
	if !a.signinLimits.allow(r) {
		w.Header().Set("Retry-After", "1")
		a.reject(w, r, apierr.Errorf(proto.CodeRateLimited, "too many sign-in attempts from this address; retry in a second"))
		return
	}
	var req proto.SignInRequest
	if !a.Decode(w, r, &req) {
		return
	}
	secret, err := a.signin.Redeem(req.Code)
	if err != nil {
		a.reject(w, r, apierr.Errorf(proto.CodeUnauthorized, "%v", signin.ErrInvalid))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, proto.SignIn{Token: secret})
}
