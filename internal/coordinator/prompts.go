package coordinator

import (
	"strings"
	"sync"

	"github.com/tandem-dev/tandem/internal/sweep"
)

// maxPrompts and maxPromptBytes bound the system prompts a coordinator
// remembers, in number and in bytes: a session's system_message may be
// large, and a few hundred of those would otherwise stay.
const (
	maxPrompts     = 256
	maxPromptBytes = 8 << 20
)

// systemPrompts remembers the system prompts built lately. Every model step
// needs one, several KB long, and it depends only on the session's settings,
// the workspace, the day and the tools offered, which most steps share.
type systemPrompts struct {
	mu    sync.Mutex
	m     map[string]string
	bytes int // keys and prompts of m, summed
	// used are the keys of m asked for since the last sweep.
	used sweep.Marks[string]
}

// get returns the prompt for the key made of parts, building it when it is
// not remembered.
func (p *systemPrompts) get(parts []string, build func() string) string {
	key := strings.Join(parts, "\x00")
	p.mu.Lock()
	s, ok := p.m[key]
	if ok {
		p.used.Use(key)
	}
	p.mu.Unlock()
	if ok {
		return s
	}
	s = build()
	p.mu.Lock()
	defer p.mu.Unlock()
	size := len(key) + len(s)
	if size > maxPromptBytes/4 {
		return s // too large to share the cache with the others
	}
	if _, ok := p.m[key]; ok {
		p.used.Use(key)
		return p.m[key]
	}
	if p.m == nil || len(p.m) >= maxPrompts || p.bytes+size > maxPromptBytes {
		p.m, p.bytes = make(map[string]string), 0
		p.used.Reset()
	}
	p.m[key] = s
	p.bytes += size
	p.used.Use(key)
	return s
}

// sweep forgets the prompts no step asked for since the previous sweep.
func (p *systemPrompts) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytes = 0
	p.m = sweep.Keep(&p.used, p.m, func(key, s string) { p.bytes += len(key) + len(s) })
}
