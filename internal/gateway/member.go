package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"google.golang.org/grpc/codes"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
)

// A member is the one Kafka consumer-group member, and the one Kafka
// client, that serves every subscribe stream of one group and topic on
// this gateway. Its client joins the group, fetches the partitions Kafka
// assigns it, and commits; the member gives each partition to one of its
// streams at a time, spreading them evenly, and its poll loop hands each
// fetched record to the queue of the stream that has the record's
// partition. Kafka sees one member per gateway, so 10,000 streams of a
// group are one client with a few connections, not 10,000 members
// rebalancing the group each time one comes or goes.
//
// Streams never hold the client up. A stream that cannot take more (its
// cap of held offsets reached, its queued bytes at --max-stream-bytes,
// draining) has its partitions paused in the client (PauseFetchPartitions);
// the poll loop resumes them when acks or sends make room. franz-go drops
// what it had buffered of a paused partition and fetches it again on
// resume, so nothing is skipped. A record whose partition has no stream
// that can take it is dropped and its partition set back to it
// (SetOffsets).
//
// A partition that changes stream (its stream ended, or a new stream
// takes its share) is set back to the oldest offset the old stream held
// (acked after a gap or not) or had queued, so the new stream gets those
// messages again: at least once. SetOffsets is franz-go's way to move a
// group consumer's position; it is called only by the poll loop between a
// poll and AllowRebalance (BlockRebalanceOnPoll), so no revocation runs
// concurrently, as franz-go asks. franz-go also advises against calling
// it concurrently with commits: that is about its own commit tracking
// (CommitUncommittedOffsets, autocommit), which this member never uses;
// it commits explicit offsets from its trackers.
//
// What sharing costs, and why it is worth it: franz-go keeps one fetch in
// flight per broker per client, so a partition resumed while that fetch
// waits at the broker for new data (FetchMaxWait) waits for it to return;
// the member's FetchMaxWait is short (memberFetchMaxWait) to bound that.
// And Kafka balances partitions over members, that is over gateways, not
// over streams: a gateway with one stream of a group and another with nine
// get half the partitions each.
//
// A member is per group and topic, not per group: a franz-go client is a
// member of one group, and could consume several topics (AddConsumeTopics),
// but each topic a gateway's streams add or drop would change the member's
// subscription and rebalance the whole group. Streams of one group on two
// topics are two members of the group on that gateway.
type member struct {
	g   *Gateway
	key memberKey
	cl  *kgo.Client

	ctx       context.Context // ends when the member closes
	cancel    context.CancelFunc
	loops     sync.WaitGroup // the poll and commit loops
	commitNow chan struct{}  // asks the commit loop to commit at once
	wake      chan struct{}  // the poll loop has pauses or rewinds to apply
	closeOnce sync.Once

	// commitMu orders the commit loop's commits and the revoke callback's.
	commitMu sync.Mutex

	mu      sync.Mutex // guards the rest, and every subStream's guarded state
	streams map[*subStream]struct{}
	parts   map[int32]*partState
	// paused are the partitions paused in cl, as the poll loop last set
	// them.
	paused     map[int32]bool
	pollCancel context.CancelFunc // ends the poll in progress
	closing    bool

	// The grace after its last stream (Config.MemberGrace), guarded by
	// mu: graceTimer, while one runs, closes the member when it fires;
	// graceGen tells that timer whether it is still the member's (a
	// stream that attached, or a later grace, moved it on).
	graceTimer *time.Timer
	graceGen   uint64

	// Nacked messages (retry.go): retryDue orders the retries waiting
	// for their time, retryTimer fires at the earliest; retrying counts
	// the partitions' retries: while it is 0, deliveries take the fast
	// path. reader fetches due retries' records again (retryreader.go);
	// nil until needed.
	retryDue   retryHeap
	retryTimer *time.Timer
	retrying   int
	reader     *retryReader
}

type memberKey struct{ group, topic string }

// memberFetchMaxWait bounds how long a fetch waits at the broker for new
// messages, and so how long a resumed partition can wait for the fetch in
// flight to come back.
const memberFetchMaxWait = 250 * time.Millisecond

// partState is what the member knows of one partition Kafka assigned it.
type partState struct {
	id    int32
	owner *subStream // nil: no stream has it now
	t     *partitionTracker
	// rewind, when >= 0, is where the poll loop must set the client's
	// position of this partition (SetOffsets) before any more of its
	// records are handed out: records fetched for it until then are
	// dropped.
	rewind    int64
	committed int64 // last commit point committed; -1: none yet
	// Nacks (retry.go): retries by offset; counts, the delivery count of
	// offsets delivered more than once.
	retries map[int64]*retry
	counts  map[int64]uint32
}

// attach adds st to the member of its group and topic, making the member
// (and its Kafka client) if this gateway has none yet.
func (g *Gateway) attach(st *subStream) error {
	key := memberKey{st.s.group, st.s.topic}
	g.membersMu.Lock()
	defer g.membersMu.Unlock()
	m := g.members[key]
	if m != nil {
		m.mu.Lock()
		if m.closing { // its last stream just left: make a new one
			m.mu.Unlock()
			m = nil
		}
	}
	if m == nil {
		var err error
		if m, err = g.newMember(key); err != nil {
			return err
		}
		g.members[key] = m
		m.mu.Lock()
	}
	defer m.mu.Unlock()
	st.m = m
	if m.endGraceLocked() {
		g.m.memberGraces.WithLabelValues("resumed").Inc()
	}
	m.streams[st] = struct{}{}
	m.balanceTo(st)
	return nil
}

// detach removes st from its member: its partitions go to the member's
// other streams, from the oldest offset it held; what it acked is
// committed at once. After its last stream, the member stays in the group
// for the grace (Config.MemberGrace), its partitions assigned, unowned
// and so paused, for a stream that reconnects to take them back without
// a rebalance; it leaves at once when the gateway ended the stream
// (draining, or moving it elsewhere), as that client is sent elsewhere.
func (g *Gateway) detach(st *subStream) {
	m := st.m
	m.mu.Lock()
	st.ended = true
	delete(m.streams, st)
	var orphans []*partState
	for _, p := range st.parts {
		m.disown(p)
		orphans = append(orphans, p)
	}
	for _, p := range orphans {
		m.giveToFewest(p)
	}
	st.dropQueueLocked(-1)
	last := len(m.streams) == 0
	var gen uint64
	grace := g.cfg.MemberGrace
	if last {
		if st.draining {
			grace = 0
		}
		gen = m.startGraceLocked(grace)
	}
	m.wakeLocked()
	m.mu.Unlock()
	select {
	case m.commitNow <- struct{}{}:
	default:
	}
	if last && grace <= 0 {
		g.releaseMember(m, gen)
	}
}

// releaseMember closes m if it still has no stream and gen is still its
// grace's generation, and reports whether it did.
func (g *Gateway) releaseMember(m *member, gen uint64) bool {
	g.membersMu.Lock()
	m.mu.Lock()
	if len(m.streams) > 0 || m.closing || m.graceGen != gen {
		m.mu.Unlock()
		g.membersMu.Unlock()
		return false
	}
	m.graceTimer = nil
	m.closing = true
	delete(g.members, m.key)
	m.mu.Unlock()
	g.membersMu.Unlock()
	m.close()
	return true
}

// closeMembers closes every member (Gateway.Close: streams should have
// ended already), those in their grace at once.
func (g *Gateway) closeMembers() {
	g.membersMu.Lock()
	var ms []*member
	for key, m := range g.members {
		m.mu.Lock()
		m.endGraceLocked()
		m.closing = true
		m.mu.Unlock()
		ms = append(ms, m)
		delete(g.members, key)
	}
	g.membersMu.Unlock()
	for _, m := range ms {
		m.close()
	}
}

// newMember makes the member of key, taking a Kafka client place.
func (g *Gateway) newMember(key memberKey) (*member, error) {
	if err := g.acquireClient(clientMember); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(g.ctx)
	m := &member{
		g: g, key: key, ctx: ctx, cancel: cancel,
		commitNow: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		streams: map[*subStream]struct{}{}, parts: map[int32]*partState{}, paused: map[int32]bool{},
	}
	cl, err := newClient(append(g.kafkaOpts(
		kgo.ConsumerGroup(key.group),
		kgo.ConsumeTopics(key.topic),
		kgo.DisableAutoCommit(),
		// Rebalances wait while the poll loop hands out what it polled
		// and sets positions back, so a revocation never races either.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(m.adjust),
		kgo.OnPartitionsRevoked(m.revoked),
		kgo.OnPartitionsLost(m.lost),
	), memberConsumeOpts(g.cfg)...))
	if err != nil {
		cancel()
		g.releaseClient(clientMember)
		return nil, streamError(codes.Unavailable, "%v", err)
	}
	m.cl = cl
	m.loops.Add(2)
	go m.pollLoop()
	go m.commitLoop()
	return m, nil
}

// close commits what was acked and leaves the group, so the partitions,
// and the unacked messages in them, go to the group's other members at
// once.
func (m *member) close() {
	m.closeOnce.Do(func() {
		m.cancel()
		m.loops.Wait()
		m.stopRetryReader()
		m.dropAllRetries()
		m.commit(m.g.ctx, nil)
		m.cl.Close()
		m.g.releaseClient(clientMember)
	})
}

// wakeLocked makes the poll loop apply pauses and rewinds now: it ends
// the poll in progress. m.mu is held.
func (m *member) wakeLocked() {
	if m.pollCancel != nil {
		m.pollCancel()
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// pollLoop fetches for every stream of the member: it polls, hands each
// record to the queue of its partition's stream, and applies what changed
// (rewinds, pauses) while rebalances wait. While the gateway's bytes in
// flight are at --max-gateway-bytes it fetches nothing.
func (m *member) pollLoop() {
	defer m.loops.Done()
	for {
		full := m.g.bytes.wait()
		pctx, cancel := context.WithCancel(m.ctx)
		m.mu.Lock()
		m.pollCancel = cancel
		m.mu.Unlock()
		select {
		case <-m.wake:
			cancel() // changes wait: poll only what is buffered
		default:
		}
		if full != nil {
			cancel()
		}
		fetches := m.cl.PollFetches(pctx)
		m.mu.Lock()
		m.pollCancel = nil
		m.mu.Unlock()
		cancel()
		closed := fetches.IsClientClosed()
		if !closed {
			m.apply(fetches)
		}
		m.cl.AllowRebalance()
		if closed || m.ctx.Err() != nil {
			return
		}
		if full != nil {
			select {
			case <-full:
			case <-m.wake:
				select { // apply it on the next round
				case m.wake <- struct{}{}:
				default:
				}
			case <-m.ctx.Done():
				return
			}
		}
	}
}

// apply hands polled records to their streams, then brings the client in
// line with the streams: partitions set back where they must restart,
// paused where no stream can take more, resumed where one can. It runs
// between a poll and AllowRebalance.
func (m *member) apply(fetches kgo.Fetches) {
	fetches.EachError(func(topic string, partition int32, err error) {
		if isContextErr(err) {
			return
		}
		m.g.log.Warn("databus: fetch error", "group", m.key.group, "topic", topic, "partition", partition, "err", err)
	})
	var rewinds map[int32]kgo.EpochOffset
	var pause, resume []int32
	m.mu.Lock()
	fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
		if fp.Topic != m.key.topic || len(fp.Records) == 0 {
			return
		}
		m.route(fp.Partition, fp.Records)
	})
	for id, p := range m.parts {
		if p.rewind >= 0 {
			if rewinds == nil {
				rewinds = map[int32]kgo.EpochOffset{}
			}
			rewinds[id] = kgo.EpochOffset{Epoch: -1, Offset: p.rewind}
			p.rewind = -1
		}
		want := p.owner == nil || p.owner.wantPause()
		if want != m.paused[id] {
			if want {
				pause = append(pause, id)
				m.paused[id] = true
			} else {
				resume = append(resume, id)
				delete(m.paused, id)
			}
		}
	}
	for id := range m.paused {
		if m.parts[id] == nil { // revoked: a later assignment starts unpaused
			resume = append(resume, id)
			delete(m.paused, id)
		}
	}
	for st := range m.streams {
		st.paused = st.wantPause()
	}
	m.mu.Unlock()
	topic := m.key.topic
	if len(rewinds) > 0 {
		m.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: rewinds})
	}
	if len(pause) > 0 {
		m.cl.PauseFetchPartitions(map[string][]int32{topic: pause})
	}
	if len(resume) > 0 {
		m.cl.ResumeFetchPartitions(map[string][]int32{topic: resume})
	}
}

// route queues records of partition id for its stream, or drops them and
// sets the partition back to the first of them when no stream may take
// them now. m.mu is held.
func (m *member) route(id int32, records []*kgo.Record) {
	p := m.parts[id]
	switch {
	case p == nil: // revoked: its new owner starts from the committed offset
		return
	case p.rewind >= 0: // fetched from where it no longer is
		return
	case p.owner == nil || p.owner.ended:
		p.rewind = records[0].Offset
		return
	}
	st := p.owner
	bytes := int64(0)
	for _, r := range records {
		bytes += recordBytes(r)
	}
	st.queue = append(st.queue, records...)
	st.queueBytes += bytes
	m.g.holdSubscribeBytes(bytes)
	st.kickLocked()
}

// balanceTo gives the new stream st its share: partitions no stream has,
// then partitions of the streams holding the most, while they hold two or
// more than st. m.mu is held.
func (m *member) balanceTo(st *subStream) {
	for _, p := range m.parts {
		if p.owner == nil {
			m.give(p, st)
		}
	}
	for {
		var top *subStream
		for _, p := range m.parts {
			if o := p.owner; o != nil && (top == nil || len(o.parts) > len(top.parts)) {
				top = o
			}
		}
		if top == nil || len(top.parts)-len(st.parts) < 2 {
			break
		}
		var move *partState // the one whose move redelivers least
		for _, p := range top.parts {
			if move == nil || p.t.held() < move.t.held() {
				move = p
			}
		}
		m.disown(move)
		m.give(move, st)
	}
	m.wakeLocked()
}

// giveToFewest gives p to the stream that may take it and has the fewest
// partitions; p stays unowned (and paused) when no stream may take it.
// m.mu is held.
func (m *member) giveToFewest(p *partState) {
	var best *subStream
	for st := range m.streams {
		if st.ended || st.draining {
			continue
		}
		if best == nil || len(st.parts) < len(best.parts) {
			best = st
		}
	}
	if best != nil {
		m.give(p, best)
	}
}

// give makes st the owner of p, which has none. m.mu is held.
func (m *member) give(p *partState, st *subStream) {
	p.owner = st
	st.parts[p.id] = p
	st.assignedP = append(st.assignedP, p.id)
	st.kickLocked()
}

// disown takes p from its owner: the owner's window of p is dropped (its
// acks for p are ignored from now on), so are its queued records of p,
// and p is set back to the oldest of them all, where its next owner
// starts. The owner is told p is revoked. m.mu is held.
func (m *member) disown(p *partState) {
	if m.parts[p.id] != p {
		m.dropPartRetriesLocked(p) // it left the member (retry.go)
	}
	st := p.owner
	if st == nil {
		return
	}
	held, unacked := p.t.held(), p.t.unacked()
	st.held -= held
	st.unacked -= unacked
	m.g.m.held.Sub(float64(held))
	m.g.m.unacked.Sub(float64(unacked))
	if unacked > 0 && m.parts[p.id] == p {
		// Its unacked messages will be delivered again; its waiting
		// ones keep their retries (retry.go).
		p.t.eachUnacked(func(o int64) { p.setCount(o, p.deliveryCount(o)+1) })
	}
	from, ok := p.t.first()
	if q, qok := st.dropQueueLocked(p.id); qok && (!ok || q < from) {
		from, ok = q, true
	}
	if ok && m.parts[p.id] == p { // it stays with the member: restart there
		if p.rewind < 0 || from < p.rewind {
			p.rewind = from
		}
		if held > 0 {
			m.g.m.rewinds.Inc()
		}
	}
	p.t.reset()
	delete(st.parts, p.id)
	p.owner = nil
	if !st.ended {
		st.revokedP = append(st.revokedP, p.id)
		st.kickLocked()
	}
}

// ack applies a stream's acks and reports how many were new and how many
// were ignored (unknown, repeated, or of partitions it no longer has).
func (m *member) ack(st *subStream, acks []*databusv1.Ack) (freed, ignored int) {
	released := 0
	m.mu.Lock()
	for _, a := range acks {
		p := st.parts[a.Partition]
		if p == nil {
			ignored++
			continue
		}
		ok, rel := p.t.ack(a.Offset)
		if !ok {
			ignored++
			continue
		}
		freed++
		released += rel
		if rel > 0 && len(p.counts) > 0 {
			p.pruneCounts()
		}
	}
	st.unacked -= freed
	st.releasedLocked(released)
	m.mu.Unlock()
	m.g.m.unacked.Sub(float64(freed))
	m.g.m.held.Sub(float64(released))
	return freed, ignored
}

// releasedLocked takes n offsets that the commit point passed off st's
// window: the room they make lets queued records go and paused
// partitions resume. m.mu is held.
func (st *subStream) releasedLocked(n int) {
	if n == 0 {
		return
	}
	st.held -= n
	st.kickLocked()
	if st.paused && !st.wantPause() {
		st.m.wakeLocked()
	}
}

func (m *member) commitLoop() {
	defer m.loops.Done()
	t := time.NewTicker(m.g.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		case <-m.commitNow:
		}
		m.commit(m.ctx, nil)
	}
}

// commit commits the acked prefix of parts (nil: every partition).
func (m *member) commit(ctx context.Context, parts []int32) {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	m.commitLocked(ctx, parts)
}

// commitLocked commits with commitMu held.
func (m *member) commitLocked(ctx context.Context, parts []int32) {
	offsets := m.commitPoints(parts)
	if offsets == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.g.cfg.KafkaTimeout)
	defer cancel()
	var commitErr error
	m.cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err == nil {
			commitErr = firstCommitErr(resp)
		}
	})
	if commitErr != nil {
		m.g.m.commits.WithLabelValues("error").Inc()
		if isContextErr(commitErr) && ctx.Err() != nil && m.ctx.Err() != nil {
			return // the member is closing: close commits again
		}
		m.g.log.Warn("databus: commit failed; the messages will be redelivered", "group", m.key.group, "err", commitErr)
		return
	}
	m.g.m.commits.WithLabelValues("ok").Inc()
	m.mu.Lock()
	for id, eo := range offsets[m.key.topic] {
		if p := m.parts[id]; p != nil && eo.Offset > p.committed {
			p.committed = eo.Offset
		}
	}
	m.mu.Unlock()
}

// commitPoints returns, for parts (nil: all), the commit points that moved
// since the last commit.
func (m *member) commitPoints(parts []int32) map[string]map[int32]kgo.EpochOffset {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int32]kgo.EpochOffset{}
	add := func(p *partState) {
		if p.t.commit >= 0 && p.t.commit > p.committed {
			out[p.id] = kgo.EpochOffset{Epoch: p.t.epoch, Offset: p.t.commit}
		}
	}
	if parts == nil {
		for _, p := range m.parts {
			add(p)
		}
	} else {
		for _, id := range parts {
			if p := m.parts[id]; p != nil {
				add(p)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return map[string]map[int32]kgo.EpochOffset{m.key.topic: out}
}

// adjust receives the partitions Kafka newly assigned the member, with
// the offsets they start from (committed, or the reset offset), and gives
// each to a stream. It changes no offset.
func (m *member) adjust(_ context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, off := range offsets[m.key.topic] {
		p := m.parts[id]
		if p == nil {
			p = &partState{id: id, t: newPartitionTracker(), rewind: -1, committed: -1}
			m.parts[id] = p
		}
		if eo := off.EpochOffset(); eo.Offset >= 0 && p.committed < 0 {
			p.committed = eo.Offset
		}
		if p.owner == nil {
			m.giveToFewest(p)
		}
	}
	m.wakeLocked()
	return offsets, nil
}

// revoked commits the acked prefix of the revoked partitions, then forgets
// them: later acks for them are ignored, and their unacked messages go to
// the new owner from the committed offset.
func (m *member) revoked(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
	ps := parts[m.key.topic]
	if len(ps) == 0 {
		return
	}
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	m.commitLocked(ctx, ps)
	m.forget(ps)
}

// lost forgets partitions without committing: the group moved on, and a
// commit would fail or, worse, land for the wrong generation.
func (m *member) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	m.forget(parts[m.key.topic])
}

func (m *member) forget(ps []int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ps {
		if p := m.parts[id]; p != nil {
			delete(m.parts, id)
			m.disown(p)
		}
	}
	m.wakeLocked()
}

// firstCommitErr returns the first per-partition error of a commit response.
func firstCommitErr(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// GroupConsumerOpts are the franz-go options with which the gateway's
// group member for cfg's subscribers joins and fetches (balancer, reset
// offset, session timeout, isolation level, fetch wait and sizes), less
// what is the member's own: its group and topic, and the callbacks
// through which it hands records out and commits. A consumer that reads Kafka itself and
// should fetch as the gateway does (the checker's direct consumer, the
// baseline of the gateway's subscribe cost) starts from them.
func GroupConsumerOpts(cfg Config) []kgo.Opt {
	cfg.setDefaults()
	return memberConsumeOpts(cfg)
}

// memberConsumeOpts are GroupConsumerOpts of a Config with its defaults
// set (and validated: New's validateMember).
func memberConsumeOpts(cfg Config) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		// A new group reads the topic from the start: a message published
		// before the first subscriber joined is not skipped.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.FetchMaxWait(memberFetchMaxWait),
		kgo.FetchIsolationLevel(cfg.isolationLevel()),
	}, memberFetchLimits(cfg.FetchMaxBytes)...)
}

// outsideGroupOpts are the options of a client that reads partitions of
// the topic outside any group, at isolation (a replay, a member's retry
// reader): fetches bounded and waiting as a member's, and a position that
// retention passed goes on from the log's start.
func outsideGroupOpts(cfg Config, isolation kgo.IsolationLevel) []kgo.Opt {
	return append([]kgo.Opt{
		kgo.FetchIsolationLevel(isolation),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(memberFetchMaxWait),
	}, memberFetchLimits(cfg.FetchMaxBytes)...)
}

// memberFetchLimits bounds a member's fetches: perPartition bytes of a
// partition (the report's 32 KiB per stream), up to 32 partitions' worth
// per fetch. At --fetch-max-bytes 50 MB (franz-go's FetchMaxBytes
// default, the report's first setting) that passes what franz-go reads in
// one response (1 GiB at most): clamped, and the read limit raised to let
// such a fetch in.
func memberFetchLimits(perPartition int32) []kgo.Opt {
	fetch := int32(min(32*int64(perPartition), 1<<30-1<<20))
	return []kgo.Opt{
		kgo.FetchMaxPartitionBytes(perPartition),
		kgo.FetchMaxBytes(fetch),
		kgo.BrokerMaxReadBytes(max(100<<20, fetch+1<<20)),
	}
}
