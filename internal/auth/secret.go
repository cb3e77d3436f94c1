package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SecretPrefix starts every secret the server makes, so a leaked one is
// recognisable (secret scanners) and other strings are refused before any
// lookup.
const SecretPrefix = "tdm_"

// secretLen is a made secret's length: the prefix and 32 random bytes.
var secretLen = len(SecretPrefix) + base64.RawURLEncoding.EncodedLen(32)

// MaxBearer bounds what is read of a bearer token; longer ones are wrong.
const MaxBearer = 512

// NewSecret makes a secret with 256 bits from crypto/rand.
func NewSecret() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
}

// Hash is what the store keeps of a secret. A secret has 256 random bits,
// so a plain SHA-256 is as strong as a slow hash here, and lets a request
// find its token with one indexed lookup.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// madeSecret reports whether s has the shape of a secret NewSecret makes.
func madeSecret(s string) bool {
	if len(s) != secretLen || !strings.HasPrefix(s, SecretPrefix) {
		return false
	}
	for _, c := range s[len(SecretPrefix):] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// ParseBearer reads the token of an Authorization header value: the scheme
// "Bearer", in any case, one or more spaces, and a token of printable ASCII
// without spaces, at most MaxBearer bytes. ok is false otherwise.
func ParseBearer(header string) (token string, ok bool) {
	scheme, rest, found := strings.Cut(header, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	if token == "" || len(token) > MaxBearer {
		return "", false
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return "", false
		}
	}
	return token, true
}

// CheckName reports why name cannot name a token, or nil: 1 to 64
// characters, each a letter, a digit or one of . _ - @.
func CheckName(name string) error {
	if name == "" || utf8.RuneCountInString(name) > 64 || !utf8.ValidString(name) {
		return invalidName(name)
	}
	for _, c := range name {
		if !unicode.IsLetter(c) && !unicode.IsDigit(c) && !strings.ContainsRune("._-@", c) {
			return invalidName(name)
		}
	}
	return nil
}
