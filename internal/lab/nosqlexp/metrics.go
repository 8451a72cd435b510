package nosqlexp

import "github.com/highload-lab/hlab/internal/labresult"

// The experiment's own figures: the --batch services' batching, read from
// their activities_batch_rows histogram.
var (
	batchRows = labresult.Metric{Name: "batch_rows", Unit: "rows", Better: labresult.Neither,
		Doc: "rows the --batch service wrote in batches, over the row's measured runs"}
	batches = labresult.Metric{Name: "batches", Better: labresult.Neither,
		Doc: "batches the --batch service wrote, over the row's measured runs"}
	meanBatchRows = labresult.Metric{Name: "mean_batch_rows", Unit: "rows", Better: labresult.Neither,
		Doc: "rows per batch on average (batch_rows / batches)"}
)
