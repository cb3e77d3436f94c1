package workspace

import (
	"encoding/json"
	"strconv"

	"github.com/tandem-dev/tandem/proto"
)

// encodeEnvelope encodes ev exactly as json.Marshal does, but trusts
// ev.Data, which number has just encoded itself: json.Marshal would check
// and compact it again, at a cost that grows with the message an event
// carries. Every event of every run goes through here.
func encodeEnvelope(ev proto.Event) []byte {
	b := make([]byte, 0, 160+len(ev.Data))
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, `,"type":`...)
	b = appendString(b, ev.Type)
	b = append(b, `,"workspace_id":`...)
	b = appendString(b, ev.WorkspaceID)
	if ev.SessionID != "" {
		b = append(b, `,"session_id":`...)
		b = appendString(b, ev.SessionID)
	}
	if ev.RunID != "" {
		b = append(b, `,"run_id":`...)
		b = appendString(b, ev.RunID)
	}
	b = append(b, `,"time":`...)
	t, _ := ev.Time.MarshalJSON() // cannot fail
	b = append(b, t...)
	if ev.Ephemeral {
		b = append(b, `,"ephemeral":true`...)
	}
	if ev.Actor != nil {
		b = append(b, `,"actor":`...)
		a, _ := json.Marshal(ev.Actor) // strings only: cannot fail
		b = append(b, a...)
	}
	b = append(b, `,"data":`...)
	if ev.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, ev.Data...)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string. The ids and types of events need
// no escaping; anything else goes through encoding/json, so escaping is
// always the standard library's.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
