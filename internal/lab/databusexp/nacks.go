package databusexp

// Ours, beyond the report: consumers that nack. A fraction of the
// messages nacked with a delay against none nacked, in rounds; poison
// messages the gateway must dead-letter after N deliveries while the rest
// flow; and the gateway SIGKILLed while nacked messages wait for their
// redelivery. The checker verifies each message once across the topic and
// its dead-letter topic (read straight from Kafka).

import (
	"context"
	"fmt"
	"time"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// The nack rows' settings.
const (
	nackFraction      = 0.01
	nackDelay         = 100 * time.Millisecond
	poisonKeys        = 20
	poisonDeliveries  = 3
	killNackFraction  = 0.1
	killNackDelay     = 3 * time.Second // longer than the kill comes into the drain
	nackMembers       = 2
	nackRoundsQuick   = 2
	nackRoundsFull    = 4
	nackKillAfter     = 2 * time.Second
	nackKillDrainTime = 90 * time.Second
)

const (
	noNackKey      labresult.Key = "nack/none"
	nackKey        labresult.Key = "nack/1pct-100ms"
	poisonKey      labresult.Key = "nack/poison-dead-letters"
	faultRetryKill labresult.Key = "fault/gateway-kill-retries-pending"
)

var (
	noNackLabel = fmt.Sprintf("ours: %d latency-optimized clients, 1 group x %d members acking every message", pubClients, nackMembers)
	nackLabel   = fmt.Sprintf("ours: %d latency-optimized clients, 1 group x %d members: %g%% of messages nacked at %v (once each, then acked)",
		pubClients, nackMembers, nackFraction*100, nackDelay)
	poisonLabel = fmt.Sprintf("ours: %d poison messages (nacked at every delivery, %v delay) reach the dead-letter topic after %d deliveries while the rest flow",
		poisonKeys, nackDelay, poisonDeliveries)
	faultRetryKillLabel = fmt.Sprintf("fault: the gateway SIGKILLed while retries are pending (%g%% of messages nacked at %v)", killNackFraction*100, killNackDelay)
)

// Figures of the nacking rows (the checker's Delivery).
var (
	nackedFig = labresult.Metric{Name: "nacked", Better: labresult.Neither,
		Doc: "nacks the consumer group's members sent"}
	redeliveredFig = labresult.Metric{Name: "redelivered", Better: labresult.Neither,
		Doc: "messages delivered with a delivery count above 1 (after a nack, or a stream that held them ended): expected, not duplicates"}
	poisonFig = labresult.Metric{Name: "poison", Better: labresult.Neither,
		Doc: "poison messages published (acked by Kafka), each of which must reach the dead-letter topic"}
	deadLetteredFig = labresult.Metric{Name: "dead_lettered", Better: labresult.Neither,
		Doc: "distinct messages the groups' gateway wrote to the dead-letter topic"}
	deadLetterDupsFig = labresult.Metric{Name: "dead_letter_duplicates", Better: labresult.Lower,
		Doc: "messages dead-lettered twice, or dead-lettered and received too"}
	deadLetterWrongFig = labresult.Metric{Name: "dead_letter_wrong", Better: labresult.Lower,
		Doc: "messages dead-lettered that were not poison (nacked ones must be acked when they come again)"}
	retriesPendingFig = labresult.Metric{Name: "retries_pending_at_kill", Better: labresult.Neither,
		Doc: "nacked messages the gateway held for redelivery (databus_retries_pending) just before the SIGKILL"}
	deadLetterOffFig = labresult.Metric{Name: "dead_letter_off_count", Better: labresult.Lower,
		Doc: "dead letters whose delivery count header is not the group's x-databus-max-deliveries"}
)

func nackMetrics() []labresult.Metric {
	return []labresult.Metric{nackedFig, redeliveredFig, poisonFig, deadLetteredFig, deadLetterDupsFig, deadLetterWrongFig, deadLetterOffFig, retriesPendingFig}
}

// nackRows declares the rows, in the order they run.
func nackRows() []lab.RowSpec {
	return []lab.RowSpec{
		lab.Row(noNackKey, noNackLabel), lab.Row(nackKey, nackLabel),
		lab.Row(poisonKey, poisonLabel), lab.Row(faultRetryKill, faultRetryKillLabel),
	}
}

// nackTargets bound the rows: nothing lost, no duplicate where no fault
// strikes, the dead letters as asked; and show the nacked fraction's
// cost as ratios, paired by round.
func nackTargets() []labresult.Target {
	zero := func(key labresult.Key, row labresult.Key, m labresult.Metric, text string) labresult.Target {
		return labresult.Target{Key: key, Text: text, Row: row, Metric: m.Name, Bound: labresult.AtMost(0)}
	}
	return []labresult.Target{
		{Key: "ours-nack-1pct-received-per-s", Text: fmt.Sprintf("ours: %g%% of messages nacked at %v: messages received per second over none nacked (the same clients, in rounds)", nackFraction*100, nackDelay),
			Ratio: &labresult.Ratio{Num: nackKey, Den: noNackKey, Metric: receivedPerS.Name}},
		{Key: "ours-nack-1pct-e2e-p99", Text: fmt.Sprintf("ours: %g%% of messages nacked at %v: end-to-end p99 over none nacked (the nacked 1%% are the p99's edge: each waits its delay)", nackFraction*100, nackDelay),
			Ratio: &labresult.Ratio{Num: nackKey, Den: noNackKey, Metric: e2eP99MS.Name}},
		zero("nack-1pct-lost", nackKey, labresult.Lost, nackLabel+": 0 lost"),
		zero("nack-1pct-duplicates", nackKey, duplicates, nackLabel+": 0 duplicates (a nacked message coming again is a redelivery, not a duplicate)"),
		zero("poison-lost", poisonKey, labresult.Lost, poisonLabel+": 0 lost (a poison message missing from the dead-letter topic is lost)"),
		zero("poison-duplicates", poisonKey, duplicates, poisonLabel+": 0 duplicates received"),
		zero("poison-dead-letter-duplicates", poisonKey, deadLetterDupsFig, poisonLabel+": 0 dead-lettered twice or both dead-lettered and received"),
		zero("poison-dead-letter-wrong", poisonKey, deadLetterWrongFig, poisonLabel+": no message that is not poison dead-lettered"),
		zero("poison-dead-letter-count", poisonKey, deadLetterOffFig, fmt.Sprintf("%s: every dead letter's delivery count is %d", poisonLabel, poisonDeliveries)),
		zero("fault-retries-pending-lost", faultRetryKill, labresult.Lost, faultRetryKillLabel+": 0 lost (duplicates expected: at least once)"),
		{Key: "fault-retries-pending-at-kill", Text: faultRetryKillLabel + ": retries were pending when the kill came (else the row proves nothing)",
			Row: faultRetryKill, Metric: retriesPendingFig.Name, Bound: labresult.AtLeast(1)},
	}
}

// nackEstimate is the rows' time in o's mode: the pair's rounds, the
// poison row's run and the fault row's drain (a kill costs a 6 s session
// and the nack delay).
func nackEstimate(o lab.Options, t timing) time.Duration {
	run, _ := o.MinRun()
	run = max(run, t.pubRun)
	pair := time.Duration(2*nackRounds(o)) * (run + 3*time.Second)
	poison := o.Warmup() + time.Duration(o.Repeats())*(run+3*time.Second)
	fault := 3*time.Second + nackKillAfter + 6*time.Second + 2*killNackDelay + 5*time.Second
	return pair + poison + fault
}

func nackRounds(o lab.Options) int {
	if o.Mode == lab.Full {
		return nackRoundsFull
	}
	return nackRoundsQuick
}

// nackClients are the rows' publishers and consumers: latency-optimized
// clients (each answer awaited) with one group reading beside them, so
// that end-to-end latency is measured.
func nackClients(c func(*checker.Config)) checker.Config {
	return with(checker.Config{Scenario: checker.Latency, Streams: pubClients, Groups: 1, Members: nackMembers}, c)
}

// nacks measures the rows: the pair on the shared gateway in rounds, the
// poison row on it, then the fault row on a gateway of its own.
func (b *bench) nacks(ctx context.Context) error {
	none := b.publish(noNackKey, nackClients(func(*checker.Config) {}))
	nacked := b.publish(nackKey, nackClients(func(c *checker.Config) { c.NackFraction, c.NackDelay = nackFraction, nackDelay }))
	n := nackRounds(b.run.Opts)
	rows, err := b.run.MeasurePaired(ctx, lab.Paired{Measurements: []lab.Measurement{none, nacked}, MinRounds: n, MaxRounds: n})
	if err != nil {
		return err
	}
	for _, row := range rows {
		publishNote(row)
		nackNote(row)
		b.run.AddRow(row)
	}
	poison := b.publish(poisonKey, nackClients(func(c *checker.Config) {
		c.PoisonKeys, c.MaxDeliveries, c.NackDelay = poisonKeys, poisonDeliveries, nackDelay
	}))
	b.topics = append(b.topics, poison.Driver.(Checker).Config.Topic+databusv1.DeadLetterSuffix)
	row, err := b.run.Measure(ctx, poison)
	if err != nil {
		return err
	}
	publishNote(row)
	nackNote(row)
	b.run.AddRow(row)
	return b.retriesPendingKill(ctx)
}

// retriesPendingKill is the fault row: members that drain the topic once
// publishing ended nack a tenth of it with a delay longer than the kill
// takes to come, so the gateway dies holding retries; the group comes
// back after the dead member's session and must receive every message.
func (b *bench) retriesPendingKill(ctx context.Context) error {
	// The gateway's count of retries it holds, read just before the kill:
	// the row is evidence only if some were pending.
	pending := -1.0
	inject := func(ctx context.Context, g *lab.Gateway, topic string) error {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if m, err := lab.ScrapeMetrics(sctx, g.URL("/metrics")); err == nil {
			pending = m.Sum(retriesPendingSeries, nil)
		}
		cancel()
		return killAndRestart(ctx, g, topic)
	}
	f := faultRow{key: faultRetryKill, inject: inject,
		what: fmt.Sprintf("the gateway SIGKILLed %v into the drain while members nacked %g%% of the messages at %v, then started again on its address", nackKillAfter, killNackFraction*100, killNackDelay),
		cfg: checker.Config{Scenario: checker.Latency, Streams: pubClients, Warmup: -1, Duration: 3 * time.Second,
			Groups: 1, Members: nackMembers, Consume: checker.After, FaultPhase: checker.ConsumePhase,
			SubBatch: 10, ProcessDelay: 5 * time.Millisecond, KillEvery: nackKillAfter, MaxFaults: 1,
			NackFraction: killNackFraction, NackDelay: killNackDelay, DrainTimeout: nackKillDrainTime},
	}
	row, err := b.faultRow(ctx, b.k, b.topic(), f)
	if err != nil {
		return fmt.Errorf("%s: %w", b.run.Label(f.key), err)
	}
	nackNote(row)
	if pending >= 0 {
		row.Set(retriesPendingFig, pending)
		row.AddNote("the gateway held %.0f nacked messages for redelivery when it was killed", pending)
	}
	b.run.AddRow(row)
	return nil
}

// retriesPendingSeries is the gateway's gauge of the nacked messages it
// holds.
const retriesPendingSeries = "databus_retries_pending"

// nackFigures gives set the checker's nack and dead-letter counts: a
// run's figures, or a fault row's.
func nackFigures(set func(labresult.Metric, float64), d *checker.Delivery) {
	if d.Nacked == 0 && d.Redelivered == 0 && d.DeadLetters == nil {
		return
	}
	set(nackedFig, float64(d.Nacked))
	set(redeliveredFig, float64(d.Redelivered))
	if f := d.DeadLetters; f != nil {
		set(poisonFig, float64(f.Poison))
		set(deadLetteredFig, float64(f.DeadLettered))
		set(deadLetterDupsFig, float64(f.Duplicates))
		set(deadLetterWrongFig, float64(f.Wrong))
		set(deadLetterOffFig, float64(f.OffCount()))
	}
}

// nackNote says a nacking row's nacks and dead letters.
func nackNote(row *labresult.Row) {
	if row.Get(nackedFig) == nil {
		return
	}
	row.AddNote("%.0f nacks sent, %.0f messages redelivered (expected after a nack, not duplicates; median run)", row.Value(nackedFig), row.Value(redeliveredFig))
	if row.Get(deadLetteredFig) != nil {
		row.AddNote("dead-letter topic read straight from Kafka: %.0f dead-lettered (of %.0f poison published), %.0f dead-letter duplicates, %.0f not poison, %.0f at a delivery count other than %d",
			row.Value(deadLetteredFig), row.Value(poisonFig), row.Value(deadLetterDupsFig), row.Value(deadLetterWrongFig), row.Value(deadLetterOffFig), poisonDeliveries)
	}
}
