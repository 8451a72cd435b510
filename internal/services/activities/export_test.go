package activities

// Queued is how many rows b holds (queued or being written), for tests
// that wait for rows to reach it.
func Queued(b *Batcher) int { return int(b.queued.Load()) }
