package report

import "errors"

// ErrNotLabJSON is returned by ReadJSONFile for a file that decodes but
// is not the output of hlab lab --json (it lists no experiments, or an
// experiment without a name).
var ErrNotLabJSON = errors.New("report: not a lab run's JSON")
