package asyncexp

import "github.com/highload-lab/hlab/internal/labresult"

// The experiment's own figures: the sync rows' counters over their runs;
// on the rows of an app that records through Kafka, what its app and
// consumer counted over the whole experiment (they share its topic) and
// how its consumer drained.
var (
	eventsRecorded = labresult.Metric{Name: "events_recorded", Better: labresult.Neither,
		Doc: "events the app answered 200 for, the event accepted"}
	eventsFailed = labresult.Metric{Name: "events_failed", Better: labresult.Lower,
		Doc: "requests the app answered 503 because it could not record the event"}
	eventsSaved = labresult.Metric{Name: "events_saved", Better: labresult.Neither,
		Doc: "sync: events the event log saved"}
	eventsProduced = labresult.Metric{Name: "events_produced", Better: labresult.Neither,
		Doc: "events Kafka stored (acknowledged to the app's producer)"}
	eventsConsumed = labresult.Metric{Name: "events_consumed", Better: labresult.Neither,
		Doc: "events the consumer processed, duplicates excluded"}
	eventsDuplicates = labresult.Metric{Name: "events_duplicates", Better: labresult.Lower,
		Doc: "events the consumer saw more than once"}
	eventsLostByApp = labresult.Metric{Name: "events_lost_by_app", Better: labresult.Lower,
		Doc: "events the app accepted and Kafka then refused for good"}
	consumerLag = labresult.Metric{Name: "consumer_lag_at_end", Better: labresult.Lower,
		Doc: "records the consumer group had not committed when the load stopped"}
	drainSeconds = labresult.Metric{Name: "drain_seconds", Unit: "s", Better: labresult.Lower,
		Doc: "time from the end of the load until the consumer had processed every event"}

	metrics = []labresult.Metric{eventsRecorded, eventsFailed, eventsSaved, eventsProduced, eventsConsumed,
		eventsDuplicates, eventsLostByApp, consumerLag, drainSeconds}
)
