package databusexp

import "github.com/highload-lab/hlab/internal/lab"

// Figures accounts for the report's figures (shared/REFERENCE.md).
func (*Experiment) Figures(lab.Options) []lab.Figure { return nil }
