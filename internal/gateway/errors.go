package gateway

import "errors"

// ErrNoBrokers is returned by New when neither brokers nor echo mode are set.
var ErrNoBrokers = errors.New("gateway: no Kafka brokers: set Config.Brokers (--brokers host:port,...) or run in echo mode (--echo)")

// ErrDraining is the status message streams end with when the gateway shuts down.
var ErrDraining = errors.New("gateway: draining for shutdown: reconnect (to another instance) and resend what was not acked")

// ErrBadLimit is returned by New when a limit of Config is out of range.
var ErrBadLimit = errors.New("gateway: limit out of range")

// ErrBadCompression is returned by New when Config.Compression or
// Config.CompressionAllowed names a codec Kafka does not have.
var ErrBadCompression = errors.New("gateway: unknown compression codec")
