package report

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/highload-lab/hlab/internal/lab"
)

// Document is the lab's JSON output (the CLI contract).
type Document struct {
	Machine     lab.Machine   `json:"machine"`
	Experiments []*lab.Result `json:"experiments"`
}

// WriteJSONFile writes doc to path, indented.
func WriteJSONFile(path string, doc Document) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode JSON: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	return nil
}
