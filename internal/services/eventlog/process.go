package eventlog

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/server"
)

// Config is "hlab serve eventlog": the HTTP service, and with Consume the
// Kafka consumer beside it. The zero value serves POST /events only.
type Config struct {
	// Consume runs a Consumer (with Consumer's settings) beside the HTTP
	// service; /healthz is ready once Kafka answered.
	Consume  bool
	Consumer ConsumerConfig
	Logger   *slog.Logger // default slog.Default()
}

// RegisterFlags adds the service's flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	cc := &c.Consumer
	fs.BoolVar(&c.Consume, "consume", false, "also consume events from Kafka (--brokers, --topic) as a consumer-group member: the async path")
	fs.Var(cliflag.List(&cc.Brokers), "brokers", "Kafka seed brokers, host:port,... (with --consume)")
	fs.StringVar(&cc.Topic, "topic", DefaultTopic, "topic of the events")
	fs.StringVar(&cc.Group, "group", DefaultGroup, "consumer group")
	fs.IntVar(&cc.DedupWindow, "dedup-window", DefaultDedupWindow, "recent event ids remembered to recognize redeliveries")
	fs.IntVar(&cc.MaxPollRecords, "max-poll-records", DefaultMaxPollRecords, "events processed between two offset commits at most")
	fs.DurationVar(&cc.CommitTimeout, "commit-timeout", DefaultCommitTimeout, "bound on one offset commit")
	fs.DurationVar(&cc.SessionTimeout, "session-timeout", DefaultSessionTimeout, "consumer-group session timeout (how long a crashed member holds its partitions)")
	fs.DurationVar(&cc.DialTimeout, "dial-timeout", DefaultDialTimeout, "bound on connecting to a broker")
}

// Serve runs the event log under the shared server configured by srv
// (its address or listener, admin address and timeouts; Serve sets its
// name, registry, logger and readiness) until ctx ends: POST /events, and
// the consumer when cfg.Consume. On shutdown the consumer commits what it
// processed and leaves its group.
func Serve(ctx context.Context, srv server.Config, cfg Config) error {
	cfg.Logger = cmp.Or(cfg.Logger, srv.Logger, slog.Default())
	reg := prometheus.NewRegistry()
	scfg := srv
	scfg.Name, scfg.Registry, scfg.Logger = "eventlog", reg, cfg.Logger
	if !cfg.Consume {
		return server.Run(ctx, scfg, Handler(reg))
	}
	cfg.Consumer.Registry, cfg.Consumer.Logger = reg, cfg.Logger
	c, err := NewConsumer(cfg.Consumer)
	if err != nil {
		return err
	}
	scfg.Ready = c.Ready
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	consumed := make(chan error, 1)
	go func() {
		err := c.Run(cctx)
		if err != nil {
			stop() // a consumer that stopped on its own takes the service down with it
		}
		consumed <- err
	}()
	cfg.Logger.Info("eventlog consuming", "brokers", c.cfg.Brokers, "topic", c.cfg.Topic, "group", c.cfg.Group)

	srvErr := server.Run(cctx, scfg, Handler(reg))
	stop()
	runErr := <-consumed
	c.Close()
	return errors.Join(srvErr, runErr)
}

// Args returns the command line that makes "hlab serve eventlog" run c (the
// fields c changes from the defaults).
func (c Config) Args() []string { return cliflag.Args(c) }
