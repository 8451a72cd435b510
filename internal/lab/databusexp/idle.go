package databusexp

// The gateway's memory per idle stream: streams open (each sends one
// message, answered), then idle, and the gateway's RSS read before and
// after; each count on a fresh gateway, so that one count's heap does
// not hide the next one's growth.

import (
	"context"
	"fmt"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// idleShape is an idle row's streams and the connections they share.
type idleShape struct{ streams, conns int }

var idleShapes = []idleShape{{1000, 1000}, {10000, 10000}, {10000, 1000}}

// idle measures the idle rows.
func (b *bench) idle(ctx context.Context) error {
	for _, s := range idleShapes {
		g, err := b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, onKafka(b.k))
		if err != nil {
			return err
		}
		row, err := b.idleRow(ctx, g, s)
		g.Stop()
		if err != nil {
			return err
		}
		b.run.AddRow(row)
	}
	return nil
}

// idleRow opens s's streams on g, leaves them idle and reads the
// gateway's RSS before and after.
func (b *bench) idleRow(ctx context.Context, g *lab.Gateway, s idleShape) (*labresult.Row, error) {
	key, settle := idleKey(s), b.t.settle
	b.run.Progress.Step(b.run.Label(key), settle+time.Duration(s.streams/1000)*time.Second)
	cfg := checker.Config{
		Target: g.GRPC, Topic: b.topic(), Brokers: b.k.Brokers, Kafka: b.k.Security, Partitions: partitions,
		Scenario: checker.Ticker, Streams: s.streams, Connections: s.conns, Aggregation: true,
		Interval: time.Hour, Warmup: -1, Duration: 100 * time.Millisecond,
		GatewayMetrics: g.URL("/metrics"), Settle: settle,
	}
	res, err := checker.Run(ctx, cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("lab: databus %s: %w", b.run.Label(key), err)
	}
	m := res.Gateway
	row := lab.NewRow(key)
	row.Runs, row.Model, row.Connections = 1, "idle", s.conns
	for kind, n := range res.Errors {
		row.Errors[kind] += n
	}
	row.RSSMBAvg, row.RSSMBMax = labresult.F(m.RSSOpenMB), labresult.F(m.RSSOpenMB)
	row.Set(rssKBPerStream, m.KBPerStream)
	row.Set(rssBeforeMB, m.RSSBeforeMB)
	row.Set(streams, float64(s.streams))
	row.Set(openS, res.OpenSeconds)
	row.AddNote("gateway RSS %.1f MB before, %.1f MB with the streams open and idle: %.1f KB per stream (aggregation on: idle streams hold no producer of their own); opened in %.1f s",
		m.RSSBeforeMB, m.RSSOpenMB, m.KBPerStream, res.OpenSeconds)
	return row, nil
}
