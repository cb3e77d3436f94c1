// Package signin keeps one-time sign-in codes: a client that holds a token
// (tandem web, tandem serve on a terminal) asks for a code and hands the
// browser a link carrying the code instead of the token, so that the token
// never sits on a command line (readable by every local user in
// /proc/PID/cmdline) or in a terminal's scrollback. The page exchanges the
// code for the token once, within a minute.
//
// Only a hash of each code is kept, and the token it stands for is sealed
// with a key derived from the code: what the server holds cannot be turned
// back into a code or a token without the code itself.
package signin

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"sync"
	"time"
)

// TTL is how long a code may be exchanged.
const TTL = time.Minute

// maxLive bounds the codes waiting to be exchanged; beyond it, Issue
// refuses until some are used or expire.
const maxLive = 1024

// ErrInvalid is what Redeem answers for a code that is unknown, already
// used or expired: the three are not told apart.
var ErrInvalid = errors.New("the sign-in code is unknown, used or expired")

// ErrFull is Issue's answer when too many codes wait.
var ErrFull = errors.New("too many sign-in codes wait to be used; try again in a minute")

type entry struct {
	sealed  []byte // nonce || AES-GCM(secret)
	expires time.Time
}

// Codes is the set of live codes; safe for concurrent use.
type Codes struct {
	now func() time.Time

	mu   sync.Mutex
	live map[[sha256.Size]byte]entry
}

// New returns an empty set; now is the clock (time.Now when nil).
func New(now func() time.Time) *Codes {
	if now == nil {
		now = time.Now
	}
	return &Codes{now: now, live: map[[sha256.Size]byte]entry{}}
}

// Issue makes a code that Redeem exchanges for secret, once, within TTL.
func (c *Codes) Issue(secret string) (code string, expires time.Time, err error) {
	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		return "", time.Time{}, err
	}
	code = base64.RawURLEncoding.EncodeToString(raw)
	aead, err := sealer(code)
	if err != nil {
		return "", time.Time{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", time.Time{}, err
	}
	sealed := aead.Seal(nonce, nonce, []byte(secret), nil)
	now := c.now()
	expires = now.Add(TTL)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	if len(c.live) >= maxLive {
		return "", time.Time{}, ErrFull
	}
	c.live[lookup(code)] = entry{sealed: sealed, expires: expires}
	return code, expires, nil
}

// Redeem exchanges code for its secret and forgets it: a second exchange
// of the same code fails, whoever tries.
func (c *Codes) Redeem(code string) (string, error) {
	if len(code) == 0 || len(code) > 64 {
		return "", ErrInvalid
	}
	key := lookup(code)
	c.mu.Lock()
	e, ok := c.live[key]
	delete(c.live, key)
	c.mu.Unlock()
	if !ok || !c.now().Before(e.expires) {
		return "", ErrInvalid
	}
	aead, err := sealer(code)
	if err != nil {
		return "", err
	}
	n := aead.NonceSize()
	if len(e.sealed) < n {
		return "", ErrInvalid
	}
	secret, err := aead.Open(nil, e.sealed[:n], e.sealed[n:], nil)
	if err != nil {
		return "", ErrInvalid
	}
	return string(secret), nil
}

// sweep drops expired codes; c.mu is held.
func (c *Codes) sweep(now time.Time) {
	for k, e := range c.live {
		if !now.Before(e.expires) {
			delete(c.live, k)
		}
	}
}

// lookup is the code's key in the set; sealer's key is derived apart from
// it, so the key of the set says nothing of the seal's.
func lookup(code string) [sha256.Size]byte {
	return sha256.Sum256([]byte("tandem sign-in code lookup\x00" + code))
}

func sealer(code string) (cipher.AEAD, error) {
	key := sha256.Sum256([]byte("tandem sign-in code seal\x00" + code))
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
