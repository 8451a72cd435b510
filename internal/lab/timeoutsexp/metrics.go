package timeoutsexp

import "github.com/highload-lab/hlab/internal/labresult"

// The experiment's own figures: counters of the front and the back over a
// row's runs, and what they say of the load the front puts on the back.
var (
	frontRequests = labresult.Metric{Name: "front_requests", Unit: "", Better: labresult.Neither,
		Doc: "requests the front answered over the row's runs (frontend_requests_total)"}
	backRequests = labresult.Metric{Name: "back_requests", Unit: "", Better: labresult.Neither,
		Doc: "requests the back received over the row's runs (backend_requests_total): hedges and retries included"}
	hedgesDenied = labresult.Metric{Name: "hedges_denied", Unit: "", Better: labresult.Neither,
		Doc: "hedges the front's budget refused over the row's runs (frontend_hedges_denied_total)"}
	extraBackRequests = labresult.Metric{Name: "extra_back_requests", Unit: "ratio", Better: labresult.Lower,
		Doc: "back requests per front request, less one: the extra load the policy puts on the back (open model only, where every request runs to its end)"}
)

// The domino rows' figures: whether the balancer kept the slow node.
var (
	slowNodeRequests = labresult.Metric{Name: "slow_node_requests", Unit: "", Better: labresult.Neither,
		Doc: "requests the slow node behind the balancer received over the row (backend_requests_total)"}
	slowNodeShare = labresult.Metric{Name: "slow_node_share", Unit: "ratio", Better: labresult.Neither,
		Doc: "the slow node's requests per request the front answered: the share of the traffic the balancer kept sending it"}
	healthChecksOK = labresult.Metric{Name: "health_checks_ok", Unit: "ratio", Better: labresult.Neither,
		Doc: "share of the slow node's health checks (GET /healthz every 200 ms, 1 s timeout) answered 200 during the row"}
)

var metrics = []labresult.Metric{frontRequests, backRequests, hedgesDenied, extraBackRequests,
	slowNodeRequests, slowNodeShare, healthChecksOK}
