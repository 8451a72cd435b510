// Package cqlsession holds what the project does with a gocql session
// that gocql does not do for it, so that the services and the
// dependencies' code share one way to do it.
package cqlsession

import (
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// closeWait is how long Close waits for the session to close.
const closeWait = 5 * time.Second

// Close closes s, giving up after 5 s: gocql v2.1.2's Session.Close can
// deadlock when the session's control connection is reconnecting at that
// moment (Close stops the schema refresher that the reconnect then waits
// for forever), which happens around a node's restart or stall. The
// session's goroutines are then left behind, and whoever shuts down does
// not hang on them.
func Close(s *gocql.Session) {
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}
