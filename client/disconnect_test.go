package client

import (
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// OnDisconnect hears of every dropped connection and failed reconnect, so
// that a UI can say it is reconnecting; the stream.opened after them says
// it is back.
func TestOnDisconnectHearsDropsAndFailedReconnects(t *testing.T) {
	_, c := newSSEStub(t,
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 1)
		},
		func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, `{"error":{"code":"shutting_down","message":"server is shutting down"}}`, http.StatusServiceUnavailable)
		},
		func(w http.ResponseWriter, r *http.Request) {
			sseHeaders(w)
			opened(w, 1)
			hold(w, r)
		},
	)
	var mu sync.Mutex
	var drops []error
	s := openStream(t, c, stubWS, EventsOptions{OnDisconnect: func(err error) {
		mu.Lock()
		defer mu.Unlock()
		drops = append(drops, err)
	}})
	got := collect(t, s, 2)
	assert.Equal(t, []string{"stream.opened", "stream.opened"}, summary(got))
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, drops, 2, "the dropped connection and the refused reconnect: %v", drops)
	assert.True(t, IsCode(drops[1], "shutting_down"), "%v", drops[1])
}
