package client

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/tandem-dev/tandem/proto"
)

// DecodeData decodes an event's data into the payload type of its event type,
// such as proto.MessageDelta for message.delta.
func DecodeData[T any](ev proto.Event) (T, error) {
	var v T
	if err := json.Unmarshal(ev.Data, &v); err != nil {
		return v, fmt.Errorf("tandem: decode %s data: %w", ev.Type, err)
	}
	return v, nil
}

// WaitRun reads the stream until the run.completed of runID and returns it.
// It consumes the stream: events it reads are not returned by Next again; use
// WaitRunFunc to see them. The stream must have been opened before the prompt
// (or resume from before it), or the completion may already have gone by.
func WaitRun(ctx context.Context, s *EventStream, runID string) (proto.RunCompleted, error) {
	return WaitRunFunc(ctx, s, runID, nil)
}

// WaitRunFunc is WaitRun that hands every event it reads to fn (when not
// nil), the completion included, so a caller can show deltas while waiting.
// A stream.reset before the completion fails with ErrStreamReset, because
// the completion may have been in what the reset skipped.
func WaitRunFunc(ctx context.Context, s *EventStream, runID string, fn func(proto.Event)) (proto.RunCompleted, error) {
	for {
		ev, err := s.Next(ctx)
		if err != nil {
			return proto.RunCompleted{}, err
		}
		if fn != nil {
			fn(ev)
		}
		switch ev.Type {
		case proto.EventStreamReset:
			return proto.RunCompleted{}, ErrStreamReset
		case proto.EventRunCompleted:
			if ev.RunID != "" && ev.RunID != runID {
				continue
			}
			rc, err := DecodeData[proto.RunCompleted](ev)
			if err != nil {
				return rc, err
			}
			if rc.RunID == runID {
				return rc, nil
			}
		}
	}
}
