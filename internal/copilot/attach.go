package copilot

import (
	"context"
	"errors"
	"sync"
)

// attachment is a session a connection created or resumed: its events flow
// to the connection until it is destroyed or the connection ends.
type attachment struct {
	wsID   string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (a *attachment) stop() {
	a.once.Do(func() {
		a.cancel()
		<-a.done
	})
}

// attach starts forwarding the session's events after seq after. A session
// created here (after 0) gets its history first, which is its session.start.
func (c *conn) attach(ctx context.Context, b Backend, wsID, sessionID string, after int64) error {
	tr := newTranslator(sessionID, c.srv.cfg.Version, c.srv.sdkModel, c.srv.extras)
	var first []Event
	if after == 0 {
		hist, err := b.History(ctx, wsID, sessionID, 0)
		if err != nil {
			return err
		}
		for _, ev := range hist {
			first = append(first, tr.translate(ev)...)
			after = ev.Seq
		}
	} else {
		// Replay what came before only to learn parent ids and tool names.
		hist, err := b.History(ctx, wsID, sessionID, 0)
		if err != nil {
			return err
		}
		for _, ev := range hist {
			if ev.Seq > after {
				break
			}
			tr.translate(ev)
		}
	}
	st, err := b.Subscribe(c.ctx, wsID, sessionID, after)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(c.ctx)
	a := &attachment{wsID: wsID, cancel: cancel, done: make(chan struct{})}
	c.mu.Lock()
	old := c.sessions[sessionID]
	c.sessions[sessionID] = a
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		defer close(a.done)
		defer st.Close()
		for _, e := range first {
			c.notify("session.event", map[string]any{"sessionId": sessionID, "event": e})
		}
		for {
			ev, err := st.Next(pctx)
			if err != nil {
				if pctx.Err() == nil && !errors.Is(err, context.Canceled) {
					c.srv.log.Warn("copilot: session event stream ended", "session", sessionID, "err", err)
				}
				return
			}
			for _, e := range tr.translate(ev) {
				c.notify("session.event", map[string]any{"sessionId": sessionID, "event": e})
			}
		}
	}()
	return nil
}

// detach stops forwarding a session's events to the connection.
func (c *conn) detach(sessionID string) {
	c.mu.Lock()
	a := c.sessions[sessionID]
	delete(c.sessions, sessionID)
	c.mu.Unlock()
	if a != nil {
		a.stop()
	}
}
