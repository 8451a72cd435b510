package app

import (
	"flag"

	"github.com/highload-lab/hlab/internal/cliflag"
)

// RegisterFlags adds the app's flags to fs ("hlab serve app").
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.Var(cliflag.Text(&c.Mode), "mode", "how an event is recorded: sync (POST to --eventlog), async (produce to Kafka, --brokers, answer once buffered), kafka-ack (produce to Kafka, --brokers, answer once Kafka acknowledged it) or databus (publish through the gateway, --databus) (default sync)")
	fs.StringVar(&c.EventLog, "eventlog", "", "sync: the event log's base URL, e.g. http://127.0.0.1:8081")
	fs.Var(cliflag.List(&c.Brokers), "brokers", "async, kafka-ack: Kafka seed brokers, host:port,...")
	fs.StringVar(&c.Topic, "topic", "events", "async, kafka-ack, databus: topic of the events (must exist)")
	fs.StringVar(&c.Databus, "databus", "", "databus: the gateway's gRPC address, host:port")
	c.DatabusCredentials.RegisterFlags(fs, "databus-") // --databus-tls-ca, --databus-token-file, ...
	fs.DurationVar(&c.Timeout, "timeout", DefaultTimeout, "sync, kafka-ack, databus: bound on recording one event (kafka-ack: on Kafka's acknowledgement)")
	fs.DurationVar(&c.ConnectTimeout, "connect-timeout", DefaultConnectTimeout, "bound on connecting to the event log or a Kafka broker")
	fs.IntVar(&c.Buffer, "buffer", DefaultBuffer, "async: accepted events waiting for Kafka at most; more are refused with 503")
	fs.DurationVar(&c.KafkaDeadline, "kafka-deadline", DefaultKafkaDeadline, "async: when events wait and Kafka stored none for this long, refuse requests with 503 until it stores again")
	fs.BoolVar(&c.Drop, "drop", false, "when an event cannot be recorded, answer 200 and count it as dropped instead of 503")
	fs.IntVar(&c.MaxInflight, "max-inflight", DefaultMaxInflight, "requests served at once; more get 503")
	fs.DurationVar(&c.FlushTimeout, "flush-timeout", DefaultFlushTimeout, "on shutdown, how long to wait for Kafka or the gateway to store pending events")
}

// Args returns the command line that makes "hlab serve app" run c (the
// fields c changes from the defaults).
func (c Config) Args() []string { return cliflag.Args(c) }
