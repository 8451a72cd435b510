package replica

import "time"

// MongoMaxStaleness bounds how old the tables' data may be before their
// Fresh returns a *StaleError (ErrStale): d after the source last
// confirmed it had every change the server had (a batch of changes
// applied, or an empty batch: the stream has caught up with the
// present, which an idle stream sees every MongoMaxAwait). 0, the
// default, is no bound. d must be longer than MongoMaxAwait plus
// MongoPollInterval. See "Bounded staleness" in the package doc.
func MongoMaxStaleness(d time.Duration) MongoOption {
	return func(c *mongoConfig) { c.maxStaleness = d }
}

// confirmMongoFresh marks c's table fresh when what its stream applied
// is whole (no transaction open, txn "") and the stream is current.
func confirmMongoFresh(c *mongoColl, h *streamHealth, txn string) {
	h.mu.Lock()
	current := h.ready && !h.stalled
	h.mu.Unlock()
	if current && txn == "" {
		c.b.freshness().confirm(time.Now())
	}
}
