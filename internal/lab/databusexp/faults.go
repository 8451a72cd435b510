package databusexp

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// What production does to the gateway, as lab rows: each row publishes
// and consumes through a gateway of its own while a fault strikes, and
// counts the acknowledged messages a consumer group never received
// (lost, which must be 0; it gates every claim). Clients ride through as
// the databus client does: publishers resend what was not answered,
// members subscribe again.

// faultGateway is the gateway of the fault rows, on k. A SIGKILLed
// gateway's group members stay in their groups until their session
// expires: 6 s is the shortest a real broker allows by default, and the
// consumers wait that long once per kill.
func faultGateway(k *lab.Kafka) gateway.Options {
	o := onKafka(k)
	o.SessionTimeout, o.CommitInterval = 6*time.Second, 200*time.Millisecond
	return o
}

const brokerOutage = 10 * time.Second

type faultRow struct {
	key labresult.Key
	cfg checker.Config
	// inject is the fault, given the row's gateway and topic; nil when
	// the checker injects it (DropMember).
	inject func(ctx context.Context, g *lab.Gateway, topic string) error
	what   string // the fault, for the row's note
}

// faults runs the fault rows, each on a fresh gateway and topic.
func (b *bench) faults(ctx context.Context) error {
	for _, f := range b.faultRows() {
		row, err := b.faultRow(ctx, b.k, b.topic(), f)
		if err != nil {
			return fmt.Errorf("%s: %w", b.run.Label(f.key), err)
		}
		b.run.AddRow(row)
	}
	return nil
}

// faultRows are the fault rows of the run's mode and Kafka.
func (b *bench) faultRows() []faultRow {
	run, k := b.run, b.k
	kill := killAndRestart
	d := 5 * time.Second
	if run.Opts.Mode == lab.Full {
		d = 20 * time.Second
	}
	// Latency-optimized publishers: each message's answer awaited, so a
	// kill leaves every stream with a message in flight and unanswered.
	pub := checker.Config{Scenario: checker.Latency, Streams: pubClients, Warmup: -1, Duration: d,
		Groups: 1, Members: 2, DrainTimeout: 90 * time.Second}
	rows := []faultRow{{
		key: faultPublish, inject: kill, what: "the gateway SIGKILLed while publishers await answers, then started again on its address",
		cfg: with(pub, func(c *checker.Config) { c.Consume, c.KillEvery, c.MaxFaults = checker.After, d/2, 1 }),
	}, {
		// Consumers start once publishing ended; batches of 10 messages,
		// each taking 5 ms to process, so the drain (some 20,000
		// messages) outlasts the kill 2 s into it.
		key: faultSubscribe, inject: kill, what: "the gateway SIGKILLed while members receive and ack, then started again on its address",
		cfg: with(pub, func(c *checker.Config) {
			c.Duration, c.Consume, c.FaultPhase = 3*time.Second, checker.After, checker.ConsumePhase
			c.SubBatch, c.ProcessDelay, c.KillEvery, c.MaxFaults = 10, 5*time.Millisecond, 2*time.Second, 1
		}),
	}, {
		key: faultMember, what: "a member's TCP connection reset (no goodbye) while it held a batch it had not acked; it subscribed again as a new member",
		cfg: with(pub, func(c *checker.Config) {
			c.Members, c.SubBatch, c.KillEvery, c.DropMember = 3, 10, d/3, true
		}),
	}}
	if brokerFault(run.Opts) {
		rows = append(rows, faultRow{
			key: faultBroker, what: fmt.Sprintf("the Kafka broker stopped for %v and started again", brokerOutage),
			inject: func(ctx context.Context, _ *lab.Gateway, _ string) error { return k.Outage(ctx, brokerOutage) },
			cfg: with(pub, func(c *checker.Config) {
				c.Duration, c.Consume, c.KillEvery, c.MaxFaults = 30*time.Second, checker.After, 5*time.Second, 1
				c.DrainTimeout = 3 * time.Minute
			}),
		})
	}
	return rows
}

// killAndRestart SIGKILLs the row's gateway and starts it again on its
// address: a faultRow's inject.
func killAndRestart(ctx context.Context, g *lab.Gateway, _ string) error {
	if err := g.Kill(); err != nil {
		return err
	}
	return g.Restart(ctx)
}

func with(c checker.Config, f func(*checker.Config)) checker.Config {
	f(&c)
	return c
}

// faultRow runs one fault row on a gateway of its own, in front of k.
func (b *bench) faultRow(ctx context.Context, k *lab.Kafka, topic string, f faultRow) (*labresult.Row, error) {
	run := b.run
	g, err := run.StartGateway(ctx, gatewayCPU, gatewayMemMB, faultGateway(k))
	if err != nil {
		return nil, err
	}
	defer g.Stop()
	cfg := f.cfg
	cfg.Target, cfg.Topic, cfg.Brokers, cfg.Partitions, cfg.Kafka = g.GRPC, topic, k.Brokers, partitions, k.Security
	if f.inject != nil {
		cfg.Inject = func(ctx context.Context) error { return f.inject(ctx, g, topic) }
	}
	run.Progress.Step(run.Label(f.key), cfg.Duration+15*time.Second)
	res, err := checker.Run(ctx, cfg, run.Progress.Logf)
	if err != nil {
		return nil, err
	}
	del := res.Delivery
	lost, acked := del.Lost, del.Acked
	var faults []string
	var failed []string
	for _, ft := range res.Faults {
		faults = append(faults, fmt.Sprintf("%.1f s", ft.AtS))
		if ft.Error != "" {
			failed = append(failed, ft.Error)
		}
	}
	if len(res.Faults) == 0 || len(failed) > 0 {
		// A fault row whose fault did not happen is no evidence.
		return nil, fmt.Errorf("the fault was not injected: %s", strings.Join(append(failed, "none fell in its phase")[:max(1, len(failed))], "; "))
	}
	row := lab.NewRow(f.key)
	row.Model, row.Runs, row.Connections, row.Requests = "fault", 1, cfg.Streams, res.Acked
	row.RPS, row.Lost, row.Acked = labresult.F(res.MsgsPerSec), &lost, &acked
	for kind, n := range res.Errors {
		row.Errors[kind] += n
	}
	row.Set(duplicates, float64(del.Duplicates))
	nackFigures(row.Set, del)
	if k.Cluster() != nil { // the failover's cost to publishers
		l := res.PublishLatency
		row.P99MS, row.MaxMS = labresult.F(l.P99), labresult.F(l.Max)
	}
	row.Set(faultsInjected, float64(len(res.Faults)))
	row.Set(drainS, del.DrainS)
	row.AddNote("%s (at %s); %d messages acked, %d lost, %d duplicates, every group drained %.1f s after publishing",
		f.what, strings.Join(faults, ", "), del.Acked, lost, del.Duplicates, del.DrainS)
	return row, nil
}
