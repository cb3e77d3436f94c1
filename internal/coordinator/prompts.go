package coordinator

import (
	"strings"
	"sync"
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
	used map[string]struct{}
}

// get returns the prompt for the key made of parts, building it when it is
// not remembered.
func (p *systemPrompts) get(parts []string, build func() string) string {
	key := strings.Join(parts, "\x00")
	p.mu.Lock()
	s, ok := p.m[key]
	if ok {
		p.useLocked(key)
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
		p.useLocked(key)
		return p.m[key]
	}
	if p.m == nil || len(p.m) >= maxPrompts || p.bytes+size > maxPromptBytes {
		p.m, p.bytes, p.used = make(map[string]string), 0, nil
	}
	p.m[key] = s
	p.bytes += size
	p.useLocked(key)
	return s
}

func (p *systemPrompts) useLocked(key string) {
	if p.used == nil {
		p.used = make(map[string]struct{})
	}
	p.used[key] = struct{}{}
}

// sweep forgets the prompts no step asked for since the previous sweep.
func (p *systemPrompts) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, bytes := make(map[string]string, len(p.used)), 0
	for key := range p.used {
		if s, ok := p.m[key]; ok {
			m[key] = s
			bytes += len(key) + len(s)
		}
	}
	p.m, p.bytes, p.used = m, bytes, nil
}
