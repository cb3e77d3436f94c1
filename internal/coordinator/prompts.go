package coordinator

import (
	"strings"
	"sync"
)

// maxPrompts bounds the system prompts a coordinator remembers.
const maxPrompts = 256

// systemPrompts remembers the system prompts built lately. Every model step
// needs one, several KB long, and it depends only on the session's settings,
// the workspace, the day and the tools offered, which most steps share.
type systemPrompts struct {
	mu sync.Mutex
	m  map[string]string
}

// get returns the prompt for the key made of parts, building it when it is
// not remembered.
func (p *systemPrompts) get(parts []string, build func() string) string {
	key := strings.Join(parts, "\x00")
	p.mu.Lock()
	s, ok := p.m[key]
	p.mu.Unlock()
	if ok {
		return s
	}
	s = build()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil || len(p.m) >= maxPrompts {
		p.m = make(map[string]string)
	}
	p.m[key] = s
	return s
}
