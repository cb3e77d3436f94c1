package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// posterEnv, when set in a test binary's environment, makes it a poster
// process (see TestMain) instead of running tests. Its value is a posterJob
// as JSON.
const posterEnv = "TANDEM_E2E_POSTER"

// posterJob is the work of the posters: len(Sessions) posters, one per
// session, post N requests between them, each poster every Every (0: as
// fast as the server answers).
type posterJob struct {
	// URL and Body are the request; "{session}" in either stands for the
	// poster's session id.
	URL, Body string
	Status    int // the answer expected
	Token     string
	Sessions  []string
	N         int
	Every     time.Duration
}

// promptJob posts prompts to the workspace's agent route.
func promptJob(base, wsID string) posterJob {
	return posterJob{
		URL:    base + "/v1/workspaces/" + wsID + "/agent",
		Body:   `{"session_id": "{session}", "prompt": "hi"}`,
		Status: http.StatusAccepted,
	}
}

// postPrompts runs the job's posters and returns each 202's latency as the
// client saw it. Posters start spread over one period so arrivals are even.
func postPrompts(client *http.Client, job posterJob) ([]time.Duration, error) {
	var (
		mu   sync.Mutex
		lat  = make([]time.Duration, 0, job.N)
		errs []error
		next atomic.Int64
		wg   sync.WaitGroup
	)
	began := time.Now()
	for p, sid := range job.Sessions {
		wg.Go(func() {
			url := strings.ReplaceAll(job.URL, "{session}", sid)
			body := []byte(strings.ReplaceAll(job.Body, "{session}", sid))
			mine := make([]time.Duration, 0, job.N/len(job.Sessions)+1)
			due := began.Add(job.Every * time.Duration(p) / time.Duration(len(job.Sessions)))
			var err error
			for err == nil && next.Add(1) <= int64(job.N) {
				if job.Every > 0 {
					time.Sleep(time.Until(due))
					due = due.Add(job.Every)
				}
				start := time.Now()
				err = postOnce(client, url, job, body)
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, mine...)
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

func postOnce(client *http.Client, url string, job posterJob, body []byte) error {
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+job.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != job.Status {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, buf.Bytes())
	}
	return nil
}

// postFromProcess runs the job in a child process (this test binary as a
// poster), the way a real client shares the machine but not the server's
// Go scheduler.
func postFromProcess(job posterJob) ([]time.Duration, error) {
	raw, err := json.Marshal(job)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), posterEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("poster process: %w", err)
	}
	var lat []time.Duration
	if err := json.Unmarshal(out, &lat); err != nil {
		return nil, fmt.Errorf("poster process output: %w", err)
	}
	return lat, nil
}

// posterMain is a poster process: it runs the job from the environment and
// prints the latencies as JSON.
func posterMain() int {
	var job posterJob
	if err := json.Unmarshal([]byte(os.Getenv(posterEnv)), &job); err != nil {
		fmt.Fprintln(os.Stderr, "poster:", err)
		return 2
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	lat, err := postPrompts(client, job)
	if err != nil {
		fmt.Fprintln(os.Stderr, "poster:", err)
		return 1
	}
	if err := json.NewEncoder(os.Stdout).Encode(lat); err != nil {
		fmt.Fprintln(os.Stderr, "poster:", err)
		return 1
	}
	return 0
}
