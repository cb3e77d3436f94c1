package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// spinnerFrames are drawn in turn before the status text.
var spinnerFrames = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

const spinnerInterval = 100 * time.Millisecond

// screen serializes what a command writes to stdout (the answer) and stderr
// (activity, questions) and, when stderr is a terminal, keeps a spinner with
// a status on stderr's last line. Everything goes through it because the
// spinner redraws its line from a goroutine: a write that bypassed it could
// be overdrawn or land in the middle of the spinner's line.
//
// On anything but a terminal it adds nothing: plain lines only, so logs and
// pipes read the same as the answer.
type screen struct {
	mu  sync.Mutex
	out io.Writer
	err io.Writer
	// live: stderr is a terminal, so the status is drawn.
	live bool
	// shared: stdout is a terminal too, the same screen as stderr's in
	// practice, so a stderr line must not start in the middle of the
	// answer's line.
	shared bool
	// outOpen: the answer written so far does not end with a newline.
	outOpen bool
	// cursorMid: on a shared screen, the cursor is after answer text.
	cursorMid bool
	status    string
	drawn     bool
	frame     int
	stop      chan struct{}
	done      chan struct{}
}

func newScreen(out, errw io.Writer, live, shared bool) *screen {
	s := &screen{out: out, err: errw, live: live, shared: live && shared,
		stop: make(chan struct{}), done: make(chan struct{})}
	if !live {
		close(s.done)
		return s
	}
	go s.spin()
	return s
}

func (s *screen) spin() {
	defer close(s.done)
	t := time.NewTicker(spinnerInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.frame++
			s.draw()
			s.mu.Unlock()
		}
	}
}

// draw puts the status on the current line; s.mu must be held. It stays off
// a line the answer is being written on.
func (s *screen) draw() {
	if !s.live || s.status == "" || s.cursorMid {
		return
	}
	fmt.Fprintf(s.err, "\r%s %s\033[K", spinnerFrames[s.frame%len(spinnerFrames)], s.status)
	s.drawn = true
}

// clear erases a drawn status; s.mu must be held.
func (s *screen) clear() {
	if s.drawn {
		fmt.Fprint(s.err, "\r\033[K")
		s.drawn = false
	}
}

// Text writes answer text to stdout, as it arrives. It hides the status:
// the text is the progress now.
func (s *screen) Text(text string) {
	if text == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clear()
	s.status = ""
	_, _ = io.WriteString(s.out, text)
	s.outOpen = !strings.HasSuffix(text, "\n")
	s.cursorMid = s.shared && s.outOpen
}

// EndText ends the answer's current line, so that the next piece of text
// (another message of the run) starts on its own.
func (s *screen) EndText() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endText()
}

func (s *screen) endText() {
	if !s.outOpen {
		return
	}
	s.clear()
	// On a shared screen a stderr line may already have moved the cursor
	// to a fresh line; another newline would only leave a blank one. Off a
	// terminal, stdout's content must end its lines itself.
	if !s.shared || s.cursorMid {
		_, _ = io.WriteString(s.out, "\n")
	}
	s.outOpen, s.cursorMid = false, false
}

// Line writes one line to stderr, on a line of its own.
func (s *screen) Line(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.newLine()
	fmt.Fprintf(s.err, format+"\n", args...)
	s.draw()
}

// newLine moves a shared screen's cursor to the start of a line; s.mu must
// be held. The newline goes to stderr, not stdout, so the answer's text
// stays exactly what the model said.
func (s *screen) newLine() {
	s.clear()
	if s.cursorMid {
		_, _ = io.WriteString(s.err, "\n")
		s.cursorMid = false
	}
}

// Ask writes a question to stderr, without a newline, and hides the status
// until the next Status so the spinner does not overdraw the answer typed.
func (s *screen) Ask(question string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.newLine()
	s.status = ""
	_, _ = io.WriteString(s.err, question)
}

// Status sets what the spinner says; "" hides it.
func (s *screen) Status(status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
	if status == "" {
		s.clear()
		return
	}
	s.draw()
}

// Close stops the spinner and ends the answer with a newline, as a command's
// output should.
func (s *screen) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = ""
	s.clear()
	s.endText()
}
