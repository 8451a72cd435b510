package tasks

import (
	"math/rand/v2"
	"time"
)

// jittered is a wait drawn between half of wait and all of it, so that
// the retries of many clients after one outage (the event listener's
// reconnects, the outbox's rows) spread out instead of coming back at
// once.
func jittered(wait time.Duration) time.Duration { return wait/2 + rand.N(wait/2+1) }
