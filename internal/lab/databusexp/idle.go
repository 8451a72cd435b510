package databusexp

// The gateway's memory per idle stream: streams open (each sends one
// message, answered), then idle, and the gateway's RSS read before and
// after; each count on a fresh gateway, so that one count's heap does
// not hide the next one's growth. The shapes of 10,000 streams run on
// the gateway's floor too (floor.go), on a fresh one next to the
// gateway's row, the two in turn alternating which goes first: the
// targets bound what a stream costs the gateway beyond the floor.

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

// idle measures the idle rows, the floor's beside the gateway's.
func (b *bench) idle(ctx context.Context) error {
	floorFirst := false
	for _, s := range idleShapes {
		if !floored(s) {
			row, err := b.idleOn(ctx, s, false)
			if err != nil {
				return err
			}
			b.run.AddRow(row)
			continue
		}
		rows := map[bool]*labresult.Row{}
		for _, floor := range []bool{floorFirst, !floorFirst} {
			row, err := b.idleOn(ctx, s, floor)
			if err != nil {
				return err
			}
			rows[floor] = row
		}
		floorFirst = !floorFirst
		gw, floor := rows[false], rows[true]
		over := gw.Value(rssKBPerStream) - floor.Value(rssKBPerStream)
		gw.Set(rssKBOverFloor, over)
		gw.AddNote("%+.1f KB per stream beyond the floor's %.1f KB, measured next to it", over, floor.Value(rssKBPerStream))
		b.run.AddRow(gw)
		b.run.AddRow(floor)
	}
	return nil
}

// idleOn measures s's idle row on a fresh gateway, or on a fresh floor
// with floor, and stops it.
func (b *bench) idleOn(ctx context.Context, s idleShape, floor bool) (*labresult.Row, error) {
	var g *lab.Gateway
	var err error
	key, who, what := idleKey(s), "gateway", "aggregation on: idle streams hold no producer of their own"
	if floor {
		key, who, what = idleFloorKey(s), "floor", "a bare grpc-go server: what grpc-go holds per stream and connection"
		g, err = b.startFloor(ctx, 0)
	} else {
		g, err = b.run.StartGateway(ctx, gatewayCPU, gatewayMemMB, onKafka(b.k))
	}
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	return b.idleRow(ctx, g, s, key, who, what)
}

// idleRow opens s's streams on g, leaves them idle and reads g's RSS
// before and after into the row of key; who names g in its note, and
// what says what g holds.
func (b *bench) idleRow(ctx context.Context, g *lab.Gateway, s idleShape, key labresult.Key, who, what string) (*labresult.Row, error) {
	settle := b.t.settle
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
	row.AddNote("%s RSS %.1f MB before, %.1f MB with the streams open and idle: %.1f KB per stream (%s); opened in %.1f s",
		who, m.RSSBeforeMB, m.RSSOpenMB, m.KBPerStream, what, res.OpenSeconds)
	return row, nil
}
