package lab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Counter is a Prometheus counter of a service under test, read before and
// after each measured run: its increase, summed over the runs, goes to
// Row.Figures[Key]. Every series of the metric is summed (labels ignored).
type Counter struct {
	Key  string // the figure's name in Row.Figures
	URL  string // the service's /metrics
	Name string // the metric, e.g. "backend_requests_total"
}

// Go runtime metrics the heap sampler reads (client_golang's Go collector).
const (
	heapMetric       = "go_memstats_heap_alloc_bytes"
	goroutinesMetric = "go_goroutines"
	sampleEvery      = 100 * time.Millisecond
)

// metricsClient scrapes services; one per lab, short timeouts, so a
// stalled service costs a sample, not the run.
var metricsClient = &http.Client{
	Timeout:   time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true},
}

// Scrape reads the Prometheus text exposition at url and returns, per
// metric name, the sum of its series' values.
func Scrape(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("lab: scrape %s: %w", url, err)
	}
	resp, err := metricsClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("lab: scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("lab: scrape %s: status %d", url, resp.StatusCode)
	}
	return parseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// parseMetrics sums the samples of a text exposition by metric name.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ \t"); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.HasPrefix(rest, "{") {
			end := labelsEnd(rest)
			if end < 0 {
				return nil, fmt.Errorf("lab: metrics line %q: unterminated labels", line)
			}
			rest = rest[end+1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("lab: metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("lab: metrics line %q: %w", line, err)
		}
		out[name] += v
	}
	return out, sc.Err()
}

// labelsEnd returns the index of the '}' closing the label set that s
// starts with, skipping quoted values; -1 if there is none.
func labelsEnd(s string) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

func readCounters(ctx context.Context, cs []Counter) (map[string]float64, error) {
	out := map[string]float64{}
	cache := map[string]map[string]float64{}
	for _, c := range cs {
		m, ok := cache[c.URL]
		if !ok {
			var err error
			if m, err = Scrape(ctx, c.URL); err != nil {
				return nil, err
			}
			cache[c.URL] = m
		}
		out[c.Key] = m[c.Name]
	}
	return out, nil
}

// heapFigures are the Go heap and goroutines of services over a window.
type heapFigures struct {
	heapAvg, heapMax float64 // MiB
	gorAvg, gorMax   float64
	samples          int
}

// heapSampler scrapes the Go heap and goroutine count of services every
// 100 ms; a sample counts only when every service answered.
type heapSampler struct {
	urls []string
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	heap     []float64
	gor      []float64
	failures int
}

func startHeapSampler(urls []string) *heapSampler {
	s := &heapSampler{urls: urls, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *heapSampler) run() {
	defer close(s.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *heapSampler) sample() {
	var heap, gor float64
	for _, u := range s.urls {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m, err := Scrape(ctx, u)
		cancel()
		if err != nil {
			s.mu.Lock()
			s.failures++
			s.mu.Unlock()
			return
		}
		heap += m[heapMetric]
		gor += m[goroutinesMetric]
	}
	s.mu.Lock()
	s.heap = append(s.heap, heap/(1<<20))
	s.gor = append(s.gor, gor)
	s.mu.Unlock()
}

// Stop ends sampling and returns the figures over the samples taken.
func (s *heapSampler) Stop() heapFigures {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	f := heapFigures{samples: len(s.heap)}
	for i := range s.heap {
		f.heapAvg += s.heap[i]
		f.gorAvg += s.gor[i]
		f.heapMax = max(f.heapMax, s.heap[i])
		f.gorMax = max(f.gorMax, s.gor[i])
	}
	if n := float64(len(s.heap)); n > 0 {
		f.heapAvg /= n
		f.gorAvg /= n
	}
	return f
}
