package labresult

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"
)

// ErrNotLabJSON is returned by ReadJSONFile for a file that decodes but
// is not the output of hlab lab --json (it lists no experiments, or an
// experiment without a name).
var ErrNotLabJSON = errors.New("labresult: not a lab run's JSON (hlab lab --json)")

// Document is the lab's JSON output (the CLI contract).
type Document struct {
	Machine Machine `json:"machine"`
	// Started is when the run began (zero in files from before it was
	// recorded).
	Started     time.Time `json:"started,omitzero"`
	Experiments []*Result `json:"experiments"`
}

// WriteJSONFile writes doc to path, indented.
func WriteJSONFile(path string, doc Document) error {
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("labresult: encode JSON: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("labresult: write %s: %w", path, err)
	}
	return nil
}

// ReadJSONFile reads a Document that WriteJSONFile wrote: the one way hlab
// decodes a lab run (hlab lab compare, scripts/labcompare). Fields it does
// not know are ignored, so files from older or newer hlab versions read; a
// file with no named experiments is ErrNotLabJSON.
func ReadJSONFile(path string) (Document, error) {
	var doc Document
	b, err := os.ReadFile(path)
	if err != nil {
		return doc, fmt.Errorf("labresult: %w", err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return doc, fmt.Errorf("%w: %s: %v", ErrNotLabJSON, path, err)
	}
	if len(doc.Experiments) == 0 {
		return doc, fmt.Errorf("%w: %s: no experiments", ErrNotLabJSON, path)
	}
	for i, e := range doc.Experiments {
		if e == nil || e.Name == "" {
			return doc, fmt.Errorf("%w: %s: experiment %d has no name", ErrNotLabJSON, path, i+1)
		}
	}
	return doc, nil
}
