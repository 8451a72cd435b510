package replica

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// MongoSource fills tables from MongoDB collections and keeps them fresh
// with change streams, one per collection. For each it takes the
// primary's operation time (the start point), reads the whole collection
// on the primary (the snapshot), swaps it in, and opens a change stream,
// on the primary too, at the start point with fullDocument: updateLookup,
// so nothing written between the snapshot and the stream is lost. It remembers the resume token of the last change it
// applied and resumes from it after a broken connection. When the history
// is gone (ChangeStreamHistoryLost: the oplog rolled past the token, or the
// server was restored from a backup) or the stream is invalidated (the
// collection was dropped or renamed), it reloads the collection and swaps
// the new copy in atomically.
//
// It needs what change streams need: a replica set or a sharded cluster
// (MongoDB 4.0 or newer, for startAtOperationTime) with majority read
// concern (the default), and the find and changeStream actions on the
// collections. Collection-level streams
// are used, not a database-level one, and collections are followed
// independently: two tables may briefly be at different points in time.
//
// The project's own tests run it against a MongoDB stand-in
// (mongo-java-server, see internal/deps), since a real mongod could not
// be installed where it was built; the code follows MongoDB's documented
// change-stream behaviour, not the stand-in's.
//
// # Rows
//
// A Row is the document's top-level fields as the driver decodes them
// into Go values: string, int32, int64, float64, bool, nil,
// bson.ObjectID, bson.DateTime, bson.Timestamp, bson.Decimal128,
// bson.Binary, bson.D for embedded documents, bson.A for arrays. "_id" is
// as stored. A delete's Row is the event's documentKey: "_id" (and the
// shard key on a sharded collection), so key functions must need no more.
//
// # Applying a change twice
//
// Between the operation time and the end of the snapshot, a change can
// be both in the snapshot and in the stream. Every event is applied as
// "the document is now this" (insert, replace and update with the looked
// up document) or "it is gone" (delete), in the stream's order, so
// replaying such changes converges to the source; while it replays, a
// document may briefly show an older state, and the table is not Ready
// until the stream has caught up (a document there that does not decode
// is counted and logged once more). An update whose looked-up document
// is gone (deleted since) is skipped: its delete comes later in the same
// stream. A resume after a lost connection starts right after the last
// applied change's resume token, so it replays nothing.
//
// # Readiness
//
// Ready depends on the stream's own progress, as PostgresSource's does on
// its WAL position. When a stream opens, the source reads the primary's
// operationTime; the table is Ready once the stream is past it: at an
// empty batch (it has caught up with the present) or at an event with a
// later clusterTime (events come in clusterTime order, so everything up
// to it has arrived). A collection written to all the time, whose
// getMores never come back empty, so becomes Ready too. It stops being
// Ready while the source reconnects, reloads, or hears nothing from the
// server for MongoMaxAwait + 3 s (a getMore stuck on a dead connection is
// given up after MongoMaxAwait + 10 s and the stream resumed on a new
// one); when the server answers again, it is Ready once the stream is
// past the server's operationTime read then. Err says why. (A server
// that reports no operationTime, like the tests' stand-in, gives the end
// of the current second of its clock instead: Ready up to a second
// later, never earlier.)
//
// # Transactions
//
// Changes the server returns in one batch become visible at once, and a
// multi-document transaction whole: its events (one session, lsid, one
// txnNumber and one clusterTime) may span batches, and a batch that ends
// inside one is held back until the transaction ends (an event that is
// not its own, or an empty batch). A stream that fails inside one drops
// what it had of it and resumes before it. The MongoDB stand-in has no
// transactions: this follows MongoDB's documentation of change events,
// and is tested with scripted batches.
//
// # Where the snapshot reads
//
// The snapshot and the stream go to the primary, whatever read preference
// the URI gives (secondaryPreferred, say, for the service's own reads). A
// secondary lags the primary: a snapshot read there could miss writes
// made before the start point, which the stream, starting there, never
// brings. The snapshot reads with read concern majority and
// afterClusterTime set to the start point: the server waits until the
// majority-committed state includes the start point and reads that, so
// the copy holds every write up to the start point and none that a
// failover could roll back (the change stream, too, returns only
// majority-committed changes).
type MongoSource struct {
	db     string
	colls  []*mongoColl
	cfg    mongoConfig
	client *options.ClientOptions

	decodeErrors atomic.Int64
	resyncs      *resyncCounter
	mu           sync.Mutex // guards each mongoColl.err
}

// mongoColl is one followed collection. Everything but err belongs to
// its goroutine.
type mongoColl struct {
	name   string
	b      Binding
	loaded bool
	// token is the resume token after the last applied change; nil right
	// after a load, when the stream resumes from start instead.
	token bson.Raw
	start bson.Timestamp // operation time the last load's stream starts at
	// ended is the cluster time of the event that ended the last stream
	// (a drop, an invalidate): the next stream starts after it.
	ended bson.Timestamp
	err   error // why the table is not current (guarded by MongoSource.mu)
}

type mongoConfig struct {
	minBackoff, maxBackoff time.Duration
	maxAwait, pollInterval time.Duration
	maxStaleness           time.Duration
	logger                 *slog.Logger
}

// MongoOption configures a MongoSource.
type MongoOption func(*mongoConfig)

// MongoBackoff bounds the wait between reconnects (default 100ms to 5s).
func MongoBackoff(min, max time.Duration) MongoOption {
	return func(c *mongoConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// MongoLogger sets where the source logs (default slog.Default()).
func MongoLogger(l *slog.Logger) MongoOption { return func(c *mongoConfig) { c.logger = l } }

// MongoMaxAwait is how long the server may hold a getMore that has no
// change to return (maxAwaitTimeMS; default 1s). Longer means fewer idle
// round trips; a change is returned as soon as it is there either way.
func MongoMaxAwait(d time.Duration) MongoOption { return func(c *mongoConfig) { c.maxAwait = d } }

// MongoPollInterval is the least time between two getMores that return
// nothing (default 20ms). A server that honours maxAwaitTimeMS makes it
// moot; against one that answers an idle getMore at once it keeps an idle
// stream from spinning a core, at the price of up to this much more lag.
func MongoPollInterval(d time.Duration) MongoOption {
	return func(c *mongoConfig) { c.pollInterval = d }
}

// NewMongoSource returns a source for the collections bound (each Table's
// name is its collection's) in database db; uri is a MongoDB connection
// string.
func NewMongoSource(uri, db string, bindings []Binding, opts ...MongoOption) (*MongoSource, error) {
	c := mongoConfig{minBackoff: 100 * time.Millisecond, maxBackoff: 5 * time.Second,
		maxAwait: time.Second, pollInterval: 20 * time.Millisecond, logger: slog.Default()}
	for _, o := range opts {
		o(&c)
	}
	if len(bindings) == 0 {
		return nil, errors.New("replica: a source needs at least one bound table (replica.Bind)")
	}
	if db == "" || strings.ContainsAny(db, "/\\. \"$") {
		return nil, fmt.Errorf("replica: bad MongoDB database name %q", db)
	}
	// Defaults first: what the URI says wins.
	client := options.Client().SetAppName("hlab-replica").SetServerSelectionTimeout(10 * time.Second).ApplyURI(uri)
	if err := client.Validate(); err != nil {
		return nil, fmt.Errorf("replica: bad MongoDB URI: %w", err)
	}
	s := &MongoSource{db: db, cfg: c, client: client, resyncs: newResyncCounter(ResyncHistoryLost, ResyncStreamEnded)}
	seen := map[string]bool{}
	for _, b := range bindings {
		name := b.tableName()
		if name == "" || strings.Contains(name, "$") || strings.HasPrefix(name, "system.") {
			return nil, fmt.Errorf("replica: %q is not a collection a change stream can follow", name)
		}
		if seen[name] {
			return nil, fmt.Errorf("replica: collection %s is bound twice", name)
		}
		seen[name] = true
		s.colls = append(s.colls, &mongoColl{name: name, b: b})
	}
	if err := boundStaleness(bindings, c.maxStaleness, c.maxAwait+c.pollInterval, "MongoMaxStaleness", "MongoMaxAwait + MongoPollInterval"); err != nil {
		return nil, err
	}
	return s, nil
}

// DecodeErrors counts documents that failed to decode (each is logged
// with its _id).
func (s *MongoSource) DecodeErrors() int64 { return s.decodeErrors.Load() }

// Resyncs counts full reloads of a collection after its first load (lost
// history, an invalidated stream).
func (s *MongoSource) Resyncs() int64 { return s.resyncs.total() }

// ResyncsByReason counts full reloads by why they were needed:
// ResyncHistoryLost and ResyncStreamEnded.
func (s *MongoSource) ResyncsByReason() map[string]int64 { return s.resyncs.byReason() }

// Err is why the source is not current now, one line per collection that
// is not, nil when every one is.
func (s *MongoSource) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, c := range s.colls {
		if c.err != nil {
			errs = append(errs, c.err)
		}
	}
	return errors.Join(errs...)
}

func (s *MongoSource) setErr(c *mongoColl, err error) {
	s.mu.Lock()
	c.err = err
	s.mu.Unlock()
	c.b.setReady(err)
}

// Run loads the collections and keeps them fresh until ctx ends; it
// returns nil then. Errors do not end it: it reports them through the
// tables' Err and readiness, reconnects with backoff, and reloads a
// collection when it must. Only a table that would pass its memory
// budget (MaxBytes) ends it, with an error wrapping ErrMemoryBudget.
func (s *MongoSource) Run(ctx context.Context) error {
	client, err := mongo.Connect(s.client)
	if err != nil {
		return fmt.Errorf("replica: mongo client: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		client.Disconnect(dctx)
	}()
	db := client.Database(s.db)
	fctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var wg sync.WaitGroup
	for _, c := range s.colls {
		wg.Go(func() {
			if err := s.follow(fctx, db, c); err != nil {
				fail(err)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(fctx); errors.Is(err, ErrMemoryBudget) {
		return err
	}
	return nil
}

// follow keeps one collection fresh until ctx ends. It returns only the
// error that must end Run: the collection would pass its memory budget.
func (s *MongoSource) follow(ctx context.Context, db *mongo.Database, c *mongoColl) error {
	for attempt := 0; ; attempt++ {
		streamed, err := s.session(ctx, db, c)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrMemoryBudget) {
			s.setErr(c, err)
			s.cfg.logger.Error("replica: stopped: a table would pass its memory budget", "collection", c.name, "err", err)
			return err
		}
		if streamed {
			attempt = 0
		}
		wait := min(s.cfg.minBackoff<<min(attempt, 10), s.cfg.maxBackoff)
		s.setErr(c, fmt.Errorf("replica: collection %s: %w; reconnecting in %s", c.name, err, wait))
		s.cfg.logger.Warn("replica: change stream interrupted", "db", s.db, "collection", c.name, "err", err, "retry_in", wait)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// session loads the collection if it must, opens its change stream (at
// the load's operation time, or after the last applied change) and
// applies changes until an error. It reloads in place when the stream
// cannot continue (lost history, invalidation). It reports whether a
// stream opened (to reset the backoff).
func (s *MongoSource) session(ctx context.Context, db *mongo.Database, c *mongoColl) (streamed bool, err error) {
	// On the primary, where the start point was taken (a secondary's
	// stream would be behind it), and majority, as change streams are.
	coll := db.Collection(c.name, options.Collection().SetReadPreference(readpref.Primary()).SetReadConcern(readconcern.Majority()))
	for {
		fresh := !c.loaded
		if fresh {
			if err := s.load(ctx, db, c); err != nil {
				return streamed, err
			}
		}
		opts := options.ChangeStream().SetFullDocument(options.UpdateLookup).SetMaxAwaitTime(s.cfg.maxAwait)
		if c.token != nil {
			opts.SetResumeAfter(c.token)
		} else {
			start := c.start
			opts.SetStartAtOperationTime(&start)
		}
		cs, err := coll.Watch(ctx, mongo.Pipeline{}, opts)
		if err != nil {
			if historyLost(err) {
				s.lost(c, ResyncHistoryLost, fmt.Errorf("its change stream cannot resume: %w", err))
				if !fresh {
					continue
				}
			}
			return streamed, fmt.Errorf("open change stream: %w", err)
		}
		streamed = true
		resync, err := s.stream(ctx, c, driverCursor{cs}, func(ctx context.Context) (bson.Timestamp, error) { return readyPoint(ctx, db) })
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		cs.Close(cctx)
		cancel()
		if resync == nil {
			return streamed, err
		}
		reason := ResyncStreamEnded
		if historyLost(resync) {
			reason = ResyncHistoryLost
		}
		s.lost(c, reason, resync)
	}
}

// lost marks c for a reload: its stream cannot go on from where it was.
// The table keeps serving its last data, not Ready, until the reload has
// caught up.
func (s *MongoSource) lost(c *mongoColl, reason string, why error) {
	c.loaded, c.token = false, nil
	s.resyncs.add(reason)
	s.setErr(c, fmt.Errorf("replica: collection %s: reloading: %w", c.name, why))
	s.cfg.logger.Warn("replica: reloading a collection", "db", s.db, "collection", c.name, "reason", reason, "why", why)
}

// historyLost reports whether err says a change stream cannot resume from
// where it was asked to: the resume point is no longer in the oplog
// (ChangeStreamHistoryLost, 286; older servers say ChangeStreamFatalError, 280),
// the token is not one this server can use (InvalidResumeToken, 260), or
// the oplog rolled over under the cursor (CappedPositionLost, 136). Only a
// reload recovers from these.
func historyLost(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	return se.HasErrorCode(286) || se.HasErrorCode(280) || se.HasErrorCode(260) || se.HasErrorCode(136)
}

// load takes the primary's operation time (the start point), then reads
// the whole collection on the primary, majority-committed, at or after
// the start point, and swaps the copy in. The stream then starts at the
// start point: whatever the snapshot missed comes after it.
func (s *MongoSource) load(ctx context.Context, db *mongo.Database, c *mongoColl) error {
	start, _, err := serverTime(ctx, db)
	if err != nil {
		return err
	}
	// The event that ended the last stream happened before this load
	// began, so the new stream can start right after it: replaying it
	// would end the new stream too.
	if after := (bson.Timestamp{T: c.ended.T, I: c.ended.I + 1}); c.ended.T != 0 && start.Before(after) {
		start = after
	}
	c.ended = bson.Timestamp{}
	began := time.Now()
	// A find command of our own: the driver adds afterClusterTime only
	// inside a causally consistent session, and the read must not go
	// where the URI's read preference would send it.
	//
	// What the tests' MongoDB stand-in cannot check: it is one server with
	// no secondaries, no majority commit point and no rollback, and it
	// ignores read concerns. TestMongoSnapshotOnPrimary checks what is
	// asked of the server (primary, majority, afterClusterTime equal to
	// the stream's start), not that a real replica set honours it.
	find := bson.D{
		{Key: "find", Value: c.name},
		{Key: "filter", Value: bson.D{}},
		{Key: "readConcern", Value: bson.D{{Key: "level", Value: "majority"}, {Key: "afterClusterTime", Value: start}}},
	}
	cur, err := db.RunCommandCursor(ctx, find, options.RunCmd().SetReadPreference(readpref.Primary()))
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", c.name, err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	c.b.beginLoad(rowShape{})
	n := 0
	for cur.Next(ctx) {
		n++
		row, err := decodeDoc(cur.Current)
		if err == nil {
			err = c.b.loadRow(row)
		}
		if errors.Is(err, ErrMemoryBudget) {
			return err
		}
		if err != nil {
			s.decodeFailed(c.name, cur.Current.Lookup("_id"), err)
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("snapshot of %s: %w", c.name, err)
	}
	c.b.finishLoad(began)
	c.loaded, c.token, c.start = true, nil, start
	s.cfg.logger.Info("replica: collection loaded from a snapshot", "db", s.db, "collection", c.name,
		"documents", n, "stream_from", fmt.Sprintf("%d.%d", start.T, start.I), "took", time.Since(began))
	return nil
}

// serverTime returns a point in the primary's history at or after every
// write it has applied: where a stream must start for a snapshot read at
// or after it to lose nothing. Replica-set members and mongos put it in
// every reply (operationTime, else $clusterTime): exact. For a server
// that reports neither it is the start of the current second of the
// server's clock (oplog timestamps are that clock's seconds, or ahead of
// it), and not exact: an earlier start only replays changes the snapshot
// has, which is harmless.
func serverTime(ctx context.Context, db *mongo.Database) (ts bson.Timestamp, exact bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	primary := options.RunCmd().SetReadPreference(readpref.Primary())
	raw, err := db.RunCommand(ctx, bson.D{{Key: "ping", Value: 1}}, primary).Raw()
	if err != nil {
		return ts, false, fmt.Errorf("ping: %w", err)
	}
	if t, i, ok := raw.Lookup("operationTime").TimestampOK(); ok {
		return bson.Timestamp{T: t, I: i}, true, nil
	}
	if t, i, ok := raw.Lookup("$clusterTime", "clusterTime").TimestampOK(); ok {
		return bson.Timestamp{T: t, I: i}, true, nil
	}
	hello, err := db.Client().Database("admin").RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}, primary).Raw()
	if err != nil {
		return ts, false, fmt.Errorf("isMaster: %w", err)
	}
	if ms, ok := hello.Lookup("localTime").DateTimeOK(); ok && ms > 0 {
		return bson.Timestamp{T: uint32(ms / 1000)}, false, nil
	}
	return ts, false, errors.New("the server reports no operation time, cluster time or clock: a change stream cannot be started where the snapshot was taken")
}

// readyPoint returns the point of the primary's history a stream must be
// past for its table to be current: at or after every write the server
// has applied now. A server that reports only its clock gives the end of
// the current second, up to a second late and never early.
func readyPoint(ctx context.Context, db *mongo.Database) (bson.Timestamp, error) {
	ts, exact, err := serverTime(ctx, db)
	if err != nil {
		return ts, fmt.Errorf("read where the server is: %w", err)
	}
	if !exact {
		ts = bson.Timestamp{T: ts.T + 1}
	}
	return ts, nil
}

// changeCursor is what stream reads of a change stream: a
// *mongo.ChangeStream, or a scripted one in tests.
type changeCursor interface {
	TryNext(context.Context) bool
	Err() error
	ID() int64
	ResumeToken() bson.Raw
	RemainingBatchLength() int
	current() bson.Raw
}

type driverCursor struct{ *mongo.ChangeStream }

func (d driverCursor) current() bson.Raw { return d.Current }

// streamHealth is one stream's readiness, shared by the stream and its
// watchdog under one lock, so that a stall the watchdog declares and an
// answer the stream gets cannot overtake each other.
type streamHealth struct {
	mu       sync.Mutex
	answered time.Time // the server's last answer
	stalled  bool      // the watchdog found the server silent since
	ready    bool
}

// answer records an answer from the server, and whether the stream was
// stalled until it.
func (h *streamHealth) answer() (wasStalled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.answered, wasStalled, h.stalled = time.Now(), h.stalled, false
	return wasStalled
}

// stream applies change events until the stream fails or ctx ends
// (err), or an event means the collection must be reloaded (resync).
//
// What it applies becomes visible a batch at a time, and a multi-document
// transaction whole: its events (which share a session, lsid, and a
// txnNumber) may span batches, and a batch that ends inside one is held
// back until the transaction is seen to end (an event of another, or an
// empty batch: once a transaction's first event is in the stream, all of
// its events are). The resume token kept is where nothing visible is
// replayed and nothing held back is lost: a transaction cut off by an
// error is dropped and comes again whole.
//
// The table is current once the stream is past readyAt: the server's
// position when the stream opened (or answered again after a stall). It
// is past it at an empty batch (it has caught up with the present) or at
// an event of a later time (events come in time order), so a collection
// written to all the time becomes current too.
func (s *MongoSource) stream(ctx context.Context, c *mongoColl, cs changeCursor, readyAt func(context.Context) (bson.Timestamp, error)) (resync, err error) {
	h := &streamHealth{answered: time.Now()}
	target, err := readyAt(ctx)
	if err != nil {
		return nil, err
	}
	var (
		pending bool      // changes applied to the binding, not yet visible
		commit  time.Time // of the last of them
		txn     string    // the transaction the last event belonged to ("": none)
		lastID  bson.Raw  // the resume token of the last event applied
		past    bool      // an event later than target arrived
	)
	// publish makes what was applied visible and keeps token (if any) as
	// where a resume starts.
	var overBudget error // what was applied would pass the budget: not published
	publish := func(token bson.Raw) {
		if pending {
			if overBudget = c.b.overBudget(); overBudget != nil {
				return
			}
			c.b.flush(commit)
			pending = false
		}
		if token != nil {
			c.token = slices.Clone(token)
		}
		if past {
			h.mu.Lock()
			if !h.stalled && !h.ready {
				h.ready = true
				s.setErr(c, nil)
			}
			h.mu.Unlock()
		}
		confirmMongoFresh(c, h, txn)
	}
	// What is still pending when the stream ends is an unfinished
	// transaction: it comes again whole from the resume token.
	defer c.b.reset()
	done := make(chan struct{})
	var dog sync.WaitGroup
	dog.Go(func() { s.watchdog(c, h, done) })
	defer func() { close(done); dog.Wait() }() // it must not outlive this stream
	for {
		polled := time.Now()
		// A getMore returns within maxAwait; one that does not is stuck
		// on a dead connection: give up on it and resume elsewhere.
		pctx, cancel := context.WithTimeout(ctx, s.cfg.maxAwait+pollTimeout)
		next := cs.TryNext(pctx)
		cancel()
		if next || cs.Err() == nil && cs.ID() != 0 {
			if h.answer() {
				// Silent for a while, the server answers again: current
				// once the stream is past where the server is now.
				if target, err = readyAt(ctx); err != nil {
					return nil, err
				}
				past = false
			}
		}
		if next {
			ev := cs.current()
			if t, i, ok := ev.Lookup("clusterTime").TimestampOK(); ok && target.Before(bson.Timestamp{T: t, I: i}) {
				past = true
			}
			if k := txnOf(ev); k != txn {
				if k != "" && pending { // a transaction begins: what came before is whole
					if publish(lastID); overBudget != nil {
						return nil, overBudget
					}
				}
				txn = k
			}
			end, t := s.event(c, ev, &pending)
			if !t.IsZero() {
				commit = t
			}
			if id, ok := ev.Lookup("_id").DocumentOK(); ok {
				lastID = id
			}
			if end != nil {
				// Events before one that ends the stream are whole.
				if publish(nil); overBudget != nil {
					return nil, overBudget
				}
				return end, nil
			}
			// The next TryNext goes to the server only once the batch is
			// used up, so nothing pending is lost to its errors.
			if cs.RemainingBatchLength() == 0 && txn == "" {
				if publish(firstToken(cs.ResumeToken(), lastID)); overBudget != nil {
					return nil, overBudget
				}
			}
			continue
		}
		if err := cs.Err(); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if historyLost(err) {
				return fmt.Errorf("its change stream lost its history: %w", err), nil
			}
			return nil, fmt.Errorf("change stream: %w", err)
		}
		if cs.ID() == 0 {
			return nil, errors.New("change stream: the server closed the cursor")
		}
		// An empty batch: the stream has caught up with the present, and
		// a transaction it was in is whole.
		txn, past = "", true
		if publish(firstToken(cs.ResumeToken(), lastID)); overBudget != nil {
			return nil, overBudget
		}
		if wait := s.cfg.pollInterval - time.Since(polled); wait > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(wait):
			}
		}
	}
}

// firstToken returns the first of tokens that is not nil: a server's
// postBatchResumeToken, else the last event's.
func firstToken(tokens ...bson.Raw) bson.Raw {
	for _, t := range tokens {
		if t != nil {
			return t
		}
	}
	return nil
}

// txnOf identifies the multi-document transaction ev is part of, "" if
// none: MongoDB puts the session (lsid) and the transaction's number on
// each of its events.
func txnOf(ev bson.Raw) string {
	n := ev.Lookup("txnNumber")
	if n.IsZero() {
		return ""
	}
	return string(ev.Lookup("lsid").Value) + "/" + string(n.Value)
}

const (
	// pollTimeout is how much longer than maxAwait a getMore may take
	// before the stream is given up and resumed on a new connection.
	pollTimeout = 10 * time.Second
	// stallAfter is how much longer than maxAwait the server may stay
	// silent before the table stops calling itself current.
	stallAfter = 3 * time.Second
)

// watchdog marks c's table not current while its stream gets no answer
// from the server (a dead connection, a server that stopped answering):
// the stream may be stuck in a getMore or a reconnect inside the driver,
// and the copy may be falling behind. The stream's next answer starts
// its catching up again.
func (s *MongoSource) watchdog(c *mongoColl, h *streamHealth, done <-chan struct{}) {
	limit := s.cfg.maxAwait + stallAfter
	tick := time.NewTicker(limit / 8)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		h.mu.Lock()
		if silent := time.Since(h.answered); silent > limit && !h.stalled {
			h.stalled, h.ready = true, false
			s.setErr(c, fmt.Errorf("replica: collection %s: no answer from the server for %s", c.name, silent.Round(time.Millisecond)))
			s.cfg.logger.Warn("replica: change stream stalled", "db", s.db, "collection", c.name, "silent_for", silent)
		}
		h.mu.Unlock()
	}
}

// event applies one change event to c's pending batch. It returns a
// reason to reload when the event ends the stream, and the event's
// commit time.
func (s *MongoSource) event(c *mongoColl, ev bson.Raw, touched *bool) (end error, commit time.Time) {
	if ms, ok := ev.Lookup("wallTime").DateTimeOK(); ok { // 6.0+
		commit = time.UnixMilli(ms)
	} else if t, _, ok := ev.Lookup("clusterTime").TimestampOK(); ok {
		commit = time.Unix(int64(t), 0)
	}
	op, _ := ev.Lookup("operationType").StringValueOK()
	ended := func(why error) error {
		if t, i, ok := ev.Lookup("clusterTime").TimestampOK(); ok {
			c.ended = bson.Timestamp{T: t, I: i}
		}
		return why
	}
	switch op {
	case "insert", "replace", "update":
		// The full document, also for updates (updateLookup): its _id is
		// the key, whatever documentKey says.
		doc, ok := ev.Lookup("fullDocument").DocumentOK()
		if !ok || doc.Lookup("_id").IsZero() {
			if op == "update" {
				// The document was gone when the server looked it up: it
				// was deleted after this update, and the delete follows.
				return nil, commit
			}
			s.decodeFailed(c.name, ev.Lookup("documentKey", "_id"), fmt.Errorf("%s event without a full document", op))
			return nil, commit
		}
		row, err := decodeDoc(doc)
		if err == nil {
			err = c.b.upsert(row)
		}
		if err != nil {
			s.decodeFailed(c.name, doc.Lookup("_id"), err)
			return nil, commit
		}
		*touched = true
	case "delete":
		key, ok := ev.Lookup("documentKey").DocumentOK()
		if !ok {
			s.decodeFailed(c.name, bson.RawValue{}, errors.New("delete event without a documentKey"))
			return nil, commit
		}
		row, err := decodeDoc(key)
		if err == nil {
			err = c.b.remove(row)
		}
		if err != nil {
			s.decodeFailed(c.name, key.Lookup("_id"), err)
			return nil, commit
		}
		*touched = true
	case "invalidate":
		return ended(errors.New("its change stream was invalidated (the collection was dropped or renamed)")), commit
	case "drop", "rename", "dropDatabase":
		// The stream ends here (an invalidate follows): the collection is
		// gone or another one, so the copy must be read again.
		if s.concerns(c, ev) {
			return ended(fmt.Errorf("a %s event ended its change stream", op)), commit
		}
	}
	// Other events (DDL shown with showExpandedEvents, new kinds) change
	// no document.
	return nil, commit
}

// concerns reports whether a drop, rename or dropDatabase event is about
// c. One that does not say what it is about is taken to be: a needless
// reload costs time, a missed one leaves the copy wrong.
func (s *MongoSource) concerns(c *mongoColl, ev bson.Raw) bool {
	ns, ok := ev.Lookup("ns").DocumentOK()
	if !ok {
		return true
	}
	if db, ok := ns.Lookup("db").StringValueOK(); ok && db != s.db {
		return false
	}
	coll, ok := ns.Lookup("coll").StringValueOK()
	if !ok || coll == c.name {
		return true
	}
	to, _ := ev.Lookup("to", "coll").StringValueOK()
	return to == c.name
}

// decodeDoc turns a document into a Row: its top-level fields as the
// driver decodes them into Go values.
func decodeDoc(doc bson.Raw) (Row, error) {
	var r Row
	if err := bson.Unmarshal(doc, &r); err != nil {
		return nil, fmt.Errorf("bson: %w", err)
	}
	return r, nil
}

func (s *MongoSource) decodeFailed(coll string, id bson.RawValue, err error) {
	s.decodeErrors.Add(1)
	key := "unknown"
	if !id.IsZero() {
		key = id.String()
	}
	s.cfg.logger.Error("replica: document not applied: it does not decode", "db", s.db, "collection", coll, "_id", key, "err", err)
}
