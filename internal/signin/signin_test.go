package signin

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestACodeIsExchangedOnceWithinAMinute(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	c := New(clk.now)
	code, exp, err := c.Issue("the-secret")
	require.NoError(t, err)
	assert.Equal(t, clk.now().Add(time.Minute), exp)
	assert.GreaterOrEqual(t, len(code), 22, "128 bits of randomness")
	assert.NotContains(t, code, "the-secret")

	got, err := c.Redeem(code)
	require.NoError(t, err)
	assert.Equal(t, "the-secret", got)
	_, err = c.Redeem(code)
	assert.ErrorIs(t, err, ErrInvalid, "single use")

	late, _, err := c.Issue("s2")
	require.NoError(t, err)
	clk.add(time.Minute)
	_, err = c.Redeem(late)
	assert.ErrorIs(t, err, ErrInvalid, "expired after a minute")

	_, err = c.Redeem("")
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = c.Redeem(strings.Repeat("x", 1000))
	assert.ErrorIs(t, err, ErrInvalid)
}

// What the set keeps is no code and no secret.
func TestOnlyHashesAndSealedSecretsAreKept(t *testing.T) {
	c := New(nil)
	code, _, err := c.Issue("owner-secret-value")
	require.NoError(t, err)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.live, 1)
	for k, e := range c.live {
		assert.NotContains(t, string(k[:]), code)
		assert.NotContains(t, string(e.sealed), "owner-secret-value")
		assert.NotContains(t, string(e.sealed), code)
	}
}

// A wrong guess burns nothing but itself; codes are bounded in number.
func TestBoundedAndGuessesFail(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	c := New(clk.now)
	code, _, err := c.Issue("s")
	require.NoError(t, err)
	// A guess one character off (never the code itself: redeeming that
	// would use it up).
	guess := code[:len(code)-1] + "A"
	if code[len(code)-1] == 'A' {
		guess = code[:len(code)-1] + "B"
	}
	_, err = c.Redeem(guess)
	assert.ErrorIs(t, err, ErrInvalid)
	for range maxLive - 1 {
		_, _, err := c.Issue("s")
		require.NoError(t, err)
	}
	_, _, err = c.Issue("s")
	assert.ErrorIs(t, err, ErrFull)
	clk.add(time.Minute)
	_, _, err = c.Issue("s")
	assert.NoError(t, err, "expired codes make room")
	got, err := c.Redeem(code)
	assert.ErrorIs(t, err, ErrInvalid, "expired: %q", got)
}
