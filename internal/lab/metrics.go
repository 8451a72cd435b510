package lab

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/promtext"
)

// Counter is a Prometheus counter of a service under test, read before and
// after each measured run: its increase, summed over the runs, is the
// row's figure Metric (one the experiment's Spec declares). The series of
// the metric whose labels include Labels are summed (all of them when
// Labels is empty).
type Counter struct {
	Metric labresult.Metric // the row's figure
	URL    string           // the service's /metrics
	Name   string           // the metric, e.g. "backend_requests_total"
	Labels map[string]string
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

// Metrics are one scrape of a Prometheus text exposition (promtext).
type Metrics = promtext.Metrics

// ScrapeMetrics reads the Prometheus text exposition at url.
func ScrapeMetrics(ctx context.Context, url string) (Metrics, error) {
	m, err := promtext.Scrape(ctx, metricsClient, url)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	return m, nil
}

// Scrape reads the Prometheus text exposition at url and returns, per
// metric name, the sum of its series' values (a histogram's or summary's
// as name_sum and name_count).
func Scrape(ctx context.Context, url string) (map[string]float64, error) {
	m, err := ScrapeMetrics(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, fam := range m {
		switch fam.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_sum"] = m.Sum(name+"_sum", nil)
			out[name+"_count"] = m.Sum(name+"_count", nil)
		default:
			out[name] = m.Sum(name, nil)
		}
	}
	return out, nil
}

func readCounters(ctx context.Context, cs []Counter) (map[string]float64, error) {
	out := map[string]float64{}
	cache := map[string]Metrics{}
	for _, c := range cs {
		m, ok := cache[c.URL]
		if !ok {
			var err error
			if m, err = ScrapeMetrics(ctx, c.URL); err != nil {
				return nil, err
			}
			cache[c.URL] = m
		}
		out[c.Metric.Name] = m.Sum(c.Name, c.Labels)
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
		m, err := ScrapeMetrics(ctx, u)
		cancel()
		if err != nil {
			s.mu.Lock()
			s.failures++
			s.mu.Unlock()
			return
		}
		heap += m.Sum(heapMetric, nil)
		gor += m.Sum(goroutinesMetric, nil)
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
