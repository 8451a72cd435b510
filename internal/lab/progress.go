package lab

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Progress shows what the lab is doing and how long is left, on stderr.
// On a terminal it redraws one status line with a bar; elsewhere (CI, a
// pipe) it prints a line per step, so logs stay readable.
type Progress struct {
	w   io.Writer
	tty bool

	mu        sync.Mutex
	exp       string
	expStart  time.Time
	estimate  time.Duration
	step      string
	stepStart time.Time
	stepDur   time.Duration
	stop      chan struct{}
	done      chan struct{}
}

// NewProgress writes progress to w, redrawing one line in place when w is
// a terminal (tty), else printing a line per step.
func NewProgress(w io.Writer, tty bool) *Progress {
	return &Progress{w: w, tty: tty}
}

// Begin starts an experiment expected to take about estimate.
func (p *Progress) Begin(exp string, estimate time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.exp, p.expStart, p.estimate = exp, time.Now(), estimate
	p.step = "starting"
	p.stepStart, p.stepDur = time.Now(), 0
	p.mu.Unlock()
	fmt.Fprintf(p.w, "== %s (about %s)\n", exp, roundDur(estimate))
	if p.tty {
		p.stop, p.done = make(chan struct{}), make(chan struct{})
		go p.redraw()
	}
}

// Step says what runs now and how long it should take.
func (p *Progress) Step(desc string, expected time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock() // experiments step from goroutines (warm-ups in parallel)
	p.step, p.stepStart, p.stepDur = desc, time.Now(), expected
	if !p.tty {
		fmt.Fprintln(p.w, p.line())
	}
}

// Logf prints a message above the status line.
func (p *Progress) Logf(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
	fmt.Fprintf(p.w, "   "+format+"\n", args...)
}

// End closes the experiment's progress with a summary line.
func (p *Progress) End(summary string) {
	if p == nil {
		return
	}
	if p.tty {
		close(p.stop)
		<-p.done
		fmt.Fprint(p.w, "\r\033[K")
	}
	p.mu.Lock()
	took := time.Since(p.expStart)
	p.mu.Unlock()
	fmt.Fprintf(p.w, "== %s done in %s: %s\n", p.exp, roundDur(took), summary)
}

func (p *Progress) redraw() {
	defer close(p.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			fmt.Fprint(p.w, "\r\033[K"+p.line())
			p.mu.Unlock()
		}
	}
}

// line renders "[scale] [#####.....]  45%  ~38s left  <step>". Call with mu held.
func (p *Progress) line() string {
	elapsed := time.Since(p.expStart)
	frac := 0.0
	if p.estimate > 0 {
		frac = min(float64(elapsed)/float64(p.estimate), 0.99)
	}
	left := p.estimate - elapsed
	if stepLeft := p.stepDur - time.Since(p.stepStart); stepLeft > left {
		left = stepLeft
	}
	eta := "~" + roundDur(left).String() + " left"
	if left <= 0 {
		eta = "finishing"
	}
	const width = 24
	n := int(frac * width)
	bar := strings.Repeat("#", n) + strings.Repeat(".", width-n)
	return fmt.Sprintf("[%s] [%s] %3.0f%%  %s  %s", p.exp, bar, frac*100, eta, p.step)
}

func roundDur(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d.Round(time.Second)
}
