package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"golang.org/x/time/rate"

	"github.com/tandem-dev/tandem/internal/apierr"
	"github.com/tandem-dev/tandem/internal/store"
	"github.com/tandem-dev/tandem/proto"
)

// OwnerTokenID is the id of the data dir's token, which is not in the store
// (its secret is the data dir's file): the same on every node.
const OwnerTokenID = "00000000-0000-0000-0000-000000000001"

// DefaultRate and DefaultBurst are a token's rate limit unless --rate says
// otherwise (contract section 9).
const (
	DefaultRate  = 20
	DefaultBurst = 100
)

// DefaultWatchEvery is how often open streams' tokens are checked against
// the store, for revocations on other nodes and expiries.
const DefaultWatchEvery = 500 * time.Millisecond

// touchEvery is how often a token's last use is written: once a minute at
// most, not at every request.
const touchEvery = time.Minute

// MaxAuditPage is the most entries one GET /v1/audit returns.
const MaxAuditPage = 1000

// Config configures a Service.
type Config struct {
	// Store keeps the tokens and the audit log.
	Store store.Auth
	// OwnerToken is the data dir's token (or --token): the owner named
	// "owner". OwnerCreatedAt is when it was made, as GET /v1/tokens shows.
	OwnerToken     string
	OwnerCreatedAt time.Time
	// Rate is each token's requests per second: 0 unlimited; Burst the
	// requests it may send at once. LimitOwner limits the owner token too
	// (--rate was given).
	Rate       float64
	Burst      int
	LimitOwner bool
	// WatchEvery is how often open streams' tokens are checked; 0 means
	// DefaultWatchEvery.
	WatchEvery time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
}

// Service authenticates tokens, manages them, limits their rates, ends the
// streams of tokens that stop being valid, and keeps the audit log. It is
// safe for concurrent use; Close stops its watcher.
type Service struct {
	cfg   Config
	owner [32]byte

	mu sync.Mutex
	// limiters are the tokens' rates, by the digest of their secret: a
	// token over its rate is refused before its lookup in the store, so a
	// flood costs the store nothing. byToken finds a token's for revoke.
	limiters map[[32]byte]*rate.Limiter
	byToken  map[string][32]byte
	touched  map[string]time.Time
	streams  map[string]map[*stream]struct{} // by token id
	// denials bounds the refusals the audit log keeps, which anyone can
	// cause without a token; skipped counts those it did not keep.
	denials *rate.Limiter
	skipped int

	stop chan struct{}
	done chan struct{}
}

type stream struct{ end func() }

// New returns the service for cfg and starts its stream watcher.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.WatchEvery == 0 {
		cfg.WatchEvery = DefaultWatchEvery
	}
	if cfg.OwnerCreatedAt.IsZero() {
		cfg.OwnerCreatedAt = cfg.Now()
	}
	s := &Service{
		cfg:      cfg,
		owner:    sha256.Sum256([]byte(cfg.OwnerToken)),
		limiters: map[[32]byte]*rate.Limiter{},
		byToken:  map[string][32]byte{},
		touched:  map[string]time.Time{},
		streams:  map[string]map[*stream]struct{}{},
		denials:  rate.NewLimiter(deniedRate, deniedBurst),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	if cfg.Store == nil {
		// Only the owner token: no stream can be revoked.
		close(s.done)
		return s
	}
	go s.watch()
	return s
}

// Close stops the watcher and waits for it.
func (s *Service) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

func (s *Service) ownerIdentity() Identity {
	return Identity{TokenID: OwnerTokenID, Name: proto.OwnerTokenName, Role: Owner}
}

// Authenticate returns the identity of a bearer secret: the owner token, or
// a live token of the store. A refusal is an unauthorized error; name is the
// refused token's person when the secret was a real one (for the audit).
func (s *Service) Authenticate(ctx context.Context, secret string) (id Identity, name string, err error) {
	// Comparing digests keeps the comparison constant-time whatever the lengths.
	sum := sha256.Sum256([]byte(secret))
	if subtle.ConstantTimeCompare(sum[:], s.owner[:]) == 1 && s.cfg.OwnerToken != "" {
		return s.ownerIdentity(), "", nil
	}
	if !madeSecret(secret) || s.cfg.Store == nil {
		return Identity{}, "", errUnauthorized("missing or wrong bearer token")
	}
	// The lookup is by digest: what a timing of it could tell is about the
	// digest, not the secret.
	t, err := s.cfg.Store.TokenByHash(ctx, Hash(secret))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Identity{}, "", errUnauthorized("missing or wrong bearer token")
	case err != nil:
		return Identity{}, "", err
	}
	now := s.cfg.Now()
	if !t.RevokedAt.IsZero() {
		return Identity{}, t.Name, errUnauthorized("the bearer token of %s was revoked", t.Name)
	}
	if !t.Live(now) {
		return Identity{}, t.Name, errUnauthorized("the bearer token of %s expired at %s", t.Name, proto.Time{Time: t.ExpiresAt})
	}
	role, ok := ParseRole(t.Role)
	if !ok {
		return Identity{}, t.Name, errUnauthorized("the bearer token of %s has an unknown role", t.Name)
	}
	s.touch(ctx, t.ID, now)
	return Identity{TokenID: t.ID, Name: t.Name, Role: role}, "", nil
}

// touch records a token's use, at most once a minute.
func (s *Service) touch(ctx context.Context, id string, now time.Time) {
	s.mu.Lock()
	last, seen := s.touched[id]
	if seen && now.Sub(last) < touchEvery {
		s.mu.Unlock()
		return
	}
	s.touched[id] = now
	s.mu.Unlock()
	if err := s.cfg.Store.TouchToken(ctx, id, now); err != nil {
		s.cfg.Logger.Debug("record token use", "token_id", id, "err", err)
	}
}

// Spent reports whether the secret's token, seen before, has spent its
// rate: then it is refused without being looked up. It takes nothing from
// the rate; Allow does, once the token is known.
func (s *Service) Spent(secret string) (retryAfter time.Duration, spent bool) {
	if s.cfg.Rate <= 0 {
		return 0, false
	}
	key := sha256.Sum256([]byte(secret))
	s.mu.Lock()
	lim := s.limiters[key]
	s.mu.Unlock()
	if lim == nil {
		return 0, false
	}
	now := s.cfg.Now()
	if lim.TokensAt(now) >= 1 {
		return 0, false
	}
	return wait(lim, now), true
}

// Allow takes one request from the rate of id, authenticated with secret;
// when the rate is spent it returns false and how long to wait. The owner
// token is unlimited unless LimitOwner.
func (s *Service) Allow(secret string, id Identity) (ok bool, retryAfter time.Duration) {
	if s.cfg.Rate <= 0 || (id.TokenID == OwnerTokenID && !s.cfg.LimitOwner) {
		return true, 0
	}
	key := sha256.Sum256([]byte(secret))
	s.mu.Lock()
	lim := s.limiters[key]
	if lim == nil {
		burst := s.cfg.Burst
		if burst <= 0 {
			burst = max(1, int(math.Ceil(s.cfg.Rate*DefaultBurst/DefaultRate)))
		}
		lim = rate.NewLimiter(rate.Limit(s.cfg.Rate), burst)
		s.limiters[key] = lim
		s.byToken[id.TokenID] = key
	}
	s.mu.Unlock()
	now := s.cfg.Now()
	if lim.AllowN(now, 1) {
		return true, 0
	}
	return false, wait(lim, now)
}

// wait is how long until lim allows one more request.
func wait(lim *rate.Limiter, now time.Time) time.Duration {
	r := lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return d
}

// Watch ends a stream opened with id (calls end) as soon as its token is
// revoked or expires, on this node or any other; the returned func stops
// watching. The owner token is never revoked.
func (s *Service) Watch(id Identity, end func()) (stop func()) {
	if id.TokenID == OwnerTokenID || id.TokenID == "" {
		return func() {}
	}
	st := &stream{end: end}
	s.mu.Lock()
	set := s.streams[id.TokenID]
	if set == nil {
		set = map[*stream]struct{}{}
		s.streams[id.TokenID] = set
	}
	set[st] = struct{}{}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.streams[id.TokenID], st)
		if len(s.streams[id.TokenID]) == 0 {
			delete(s.streams, id.TokenID)
		}
		s.mu.Unlock()
	}
}

// endStreams ends every watched stream of a token.
func (s *Service) endStreams(tokenID string) {
	s.mu.Lock()
	set := s.streams[tokenID]
	delete(s.streams, tokenID)
	if key, ok := s.byToken[tokenID]; ok {
		delete(s.limiters, key)
		delete(s.byToken, tokenID)
	}
	s.mu.Unlock()
	for st := range set {
		st.end()
	}
}

// watch checks, every WatchEvery, the tokens of open streams: revoked on
// another node, or expired, their streams end.
func (s *Service) watch() {
	defer close(s.done)
	t := time.NewTicker(s.cfg.WatchEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		ids := make([]string, 0, len(s.streams))
		for id := range s.streams {
			ids = append(ids, id)
		}
		s.mu.Unlock()
		for _, id := range ids {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.WatchEvery*4)
			tok, err := s.cfg.Store.GetToken(ctx, id)
			cancel()
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				s.cfg.Logger.Debug("check token of open streams", "token_id", id, "err", err)
				continue
			}
			if err != nil || !tok.Live(s.cfg.Now()) {
				s.endStreams(id)
			}
		}
	}
}

// Me answers GET /v1/me.
func (s *Service) Me(id Identity) proto.Me {
	return proto.Me{TokenID: id.TokenID, Name: id.Name, Role: id.Role.String()}
}

func view(t store.Token) proto.Token {
	v := proto.Token{ID: t.ID, Name: t.Name, Role: t.Role, CreatedAt: proto.Time{Time: t.CreatedAt}}
	if !t.ExpiresAt.IsZero() {
		v.ExpiresAt = &proto.Time{Time: t.ExpiresAt}
	}
	if !t.LastUsedAt.IsZero() {
		v.LastUsedAt = &proto.Time{Time: t.LastUsedAt}
	}
	return v
}

// maxExpiry bounds expires_in, so that the time it gives stays a time.
const maxExpiry = 100 * 365 * 24 * time.Hour

// Create makes a token for a person and returns it with its secret, which
// nobody is shown again.
func (s *Service) Create(ctx context.Context, req proto.CreateTokenRequest) (proto.TokenCreated, error) {
	if err := CheckName(req.Name); err != nil {
		return proto.TokenCreated{}, err
	}
	if req.Role == "" {
		req.Role = proto.RoleMember
	}
	if _, ok := ParseRole(req.Role); !ok {
		return proto.TokenCreated{}, apierr.Invalid("role must be viewer, member or owner, got %q", req.Role)
	}
	if req.Name == proto.OwnerTokenName {
		return proto.TokenCreated{}, apierr.Errorf(proto.CodeAlreadyExists, "the name %q is the data dir's token", req.Name)
	}
	now := s.cfg.Now().UTC().Truncate(time.Microsecond)
	t := store.Token{ID: uuid.NewString(), Name: req.Name, Role: req.Role, CreatedAt: now}
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 || d > maxExpiry {
			return proto.TokenCreated{}, apierr.Invalid("expires_in must be a positive Go duration such as 720h, got %q", req.ExpiresIn)
		}
		t.ExpiresAt = now.Add(d)
	}
	if s.cfg.Store == nil {
		return proto.TokenCreated{}, errNoStore
	}
	secret := NewSecret()
	t.Hash = Hash(secret)
	if err := s.cfg.Store.CreateToken(ctx, t); err != nil {
		if errors.Is(err, store.ErrExists) {
			return proto.TokenCreated{}, apierr.Errorf(proto.CodeAlreadyExists, "a token named %q already exists", req.Name)
		}
		return proto.TokenCreated{}, err
	}
	return proto.TokenCreated{Token: view(t), Secret: secret}, nil
}

// List returns the live tokens, the owner token first.
func (s *Service) List(ctx context.Context) ([]proto.Token, error) {
	var list []store.Token
	if s.cfg.Store != nil {
		var err error
		if list, err = s.cfg.Store.ListTokens(ctx, s.cfg.Now()); err != nil {
			return nil, err
		}
	}
	out := make([]proto.Token, 0, len(list)+1)
	out = append(out, proto.Token{ID: OwnerTokenID, Name: proto.OwnerTokenName, Role: proto.RoleOwner,
		CreatedAt: proto.Time{Time: s.cfg.OwnerCreatedAt.UTC().Truncate(time.Microsecond)}})
	for _, t := range list {
		out = append(out, view(t))
	}
	return out, nil
}

// Revoke revokes the token with that id or, failing that, the live token
// of that name; its streams end at once here, within WatchEvery elsewhere.
func (s *Service) Revoke(ctx context.Context, idOrName string) (proto.Token, error) {
	if idOrName == OwnerTokenID || idOrName == proto.OwnerTokenName {
		return proto.Token{}, apierr.Errorf(proto.CodeForbidden, "the owner token (the data dir's) cannot be revoked through the API; replace the data dir's token file instead")
	}
	if s.cfg.Store == nil {
		return proto.Token{}, errNoStore
	}
	t, err := s.find(ctx, idOrName)
	if err != nil {
		return proto.Token{}, err
	}
	if err := s.cfg.Store.RevokeToken(ctx, t.ID, s.cfg.Now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return proto.Token{}, apierr.Errorf(proto.CodeNotFound, "no token %q", idOrName)
		}
		return proto.Token{}, err
	}
	s.endStreams(t.ID)
	return view(t), nil
}

// find returns the live token with that id, else that name.
func (s *Service) find(ctx context.Context, idOrName string) (store.Token, error) {
	if _, err := uuid.Parse(idOrName); err == nil {
		t, err := s.cfg.Store.GetToken(ctx, idOrName)
		if err == nil && t.Live(s.cfg.Now()) {
			return t, nil
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return store.Token{}, err
		}
	}
	list, err := s.cfg.Store.ListTokens(ctx, s.cfg.Now())
	if err != nil {
		return store.Token{}, err
	}
	for _, t := range list {
		if t.Name == idOrName {
			return t, nil
		}
	}
	return store.Token{}, apierr.Errorf(proto.CodeNotFound, "no token %q", idOrName)
}

// Record appends an entry to the audit log. A failure is logged, not
// returned: the request it describes is done.
func (s *Service) Record(ctx context.Context, e store.AuditEntry) {
	if s.cfg.Store == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = s.cfg.Now().UTC().Truncate(time.Microsecond)
	}
	// The ids come from requests' bodies and the detail names their paths,
	// which are written here even when the request is refused: bounded, so
	// that a token's requests cannot fill the store through the log.
	e.ClientID, e.WorkspaceID = clip(e.ClientID, maxAuditID), clip(e.WorkspaceID, maxAuditID)
	e.SessionID, e.RunID = clip(e.SessionID, maxAuditID), clip(e.RunID, maxAuditID)
	e.Detail = clip(e.Detail, maxAuditDetail)
	if _, err := s.cfg.Store.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.cfg.Logger.Warn("audit log", "action", e.Action, "err", err)
	}
}

// Bounds of an audit entry's fields, in bytes: an id is a UUID (36), a
// detail a line.
const (
	maxAuditID     = 64
	maxAuditDetail = 1024
)

// clip cuts s to at most n bytes, on a character boundary, saying so; a
// NUL or a byte that is not UTF-8 becomes U+FFFD (PostgreSQL's text takes
// neither, and would refuse the whole entry).
func clip(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= n {
		return s
	}
	const more = "..."
	cut := n - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// Refusals the audit log keeps: a steady 10 a second, in bursts of 100;
// beyond, they are counted, and the next entry kept says how many were not.
const (
	deniedRate  = 10
	deniedBurst = 100
)

// RecordDenied appends the audit entry of a refused request (a 401 or a
// 403), unless a flood of refusals is under way: anyone can send those,
// and they must not fill the store.
func (s *Service) RecordDenied(ctx context.Context, e store.AuditEntry) {
	e.Action = string(Denied)
	s.mu.Lock()
	if !s.denials.Allow() {
		s.skipped++
		s.mu.Unlock()
		return
	}
	if s.skipped > 0 {
		e.Detail += fmt.Sprintf(" (and %d refusals before it, not kept: too many at once)", s.skipped)
		s.skipped = 0
	}
	s.mu.Unlock()
	s.Record(ctx, e)
}

// Audit returns a page of the audit log: at most limit entries (default 100,
// at most MaxAuditPage) with id > after, oldest first.
func (s *Service) Audit(ctx context.Context, after int64, limit int) ([]proto.AuditEntry, error) {
	if limit == 0 {
		limit = 100
	}
	if limit < 0 || limit > MaxAuditPage {
		return nil, apierr.Invalid("limit must be between 1 and %d, got %d", MaxAuditPage, limit)
	}
	if s.cfg.Store == nil {
		return []proto.AuditEntry{}, nil
	}
	list, err := s.cfg.Store.ListAudit(ctx, after, limit)
	if err != nil {
		return nil, err
	}
	out := make([]proto.AuditEntry, len(list))
	for i, e := range list {
		out[i] = proto.AuditEntry{ID: e.ID, Time: proto.Time{Time: e.Time}, TokenID: e.TokenID, Name: e.Name,
			ClientID: e.ClientID, Action: e.Action, WorkspaceID: e.WorkspaceID, SessionID: e.SessionID,
			RunID: e.RunID, Detail: e.Detail}
	}
	return out, nil
}

// errNoStore answers what needs a store on a service built without one.
var errNoStore = errors.New("auth: no store for tokens")

func invalidName(name string) error {
	if len(name) > 80 {
		name = name[:80] + "..."
	}
	return apierr.Invalid("name must be 1 to 64 letters, digits, '.', '_', '-' or '@', got %q", name)
}
