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

var metrics = []labresult.Metric{frontRequests, backRequests, hedgesDenied, extraBackRequests}
