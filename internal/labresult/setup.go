package labresult

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Setup is one item of an experiment's setup set beside the report's: a
// version, a config, a schema, a client setting, the load's shape, a
// duration, a quota. Report is what the report ran, Ours what the lab
// runs, Why why they differ where they do. A reader who knows the report
// finds every difference here, not by reading the lab's code.
type Setup struct {
	Item   string `json:"item"`
	Report string `json:"report"`
	Ours   string `json:"ours"`
	Why    string `json:"why,omitempty"`
	// FirstClaim: rows of the first claim, the report's own setup, run
	// with this item, so a difference here is one in the report's rerun.
	FirstClaim bool `json:"claim1"`
}

// MarshalJSON writes the item with "differs" beside its fields, so that
// a reader of the JSON need not compare the values itself.
func (s Setup) MarshalJSON() ([]byte, error) {
	type fields Setup // without this method
	return json.Marshal(struct {
		fields
		Differs bool `json:"differs"`
	}{fields(s), s.Differs()})
}

// Differs reports whether ours is not the report's. Whitespace is not a
// difference: a config quoted over several lines reads the same.
func (s Setup) Differs() bool { return SetupText(s.Report) != SetupText(s.Ours) }

// Marked reports whether the item differs from the report's in a row of
// the first claim: the differences a reader of the first verdict must
// weigh.
func (s Setup) Marked() bool { return s.FirstClaim && s.Differs() }

// FirstClaimDifferences counts the marked items of setup.
func FirstClaimDifferences(setup []Setup) int {
	n := 0
	for _, s := range setup {
		if s.Marked() {
			n++
		}
	}
	return n
}

// SetupText is a setup value with its runs of whitespace made one space,
// the form setup values are compared in.
func SetupText(s string) string { return strings.Join(strings.Fields(s), " ") }

// Line is the item in a line of text: its mark ("!" a difference in the
// first claim's rows, "~" one elsewhere, "=" as the report), the item,
// and the report's value and ours, or the one value both run.
func (s Setup) Line() string {
	if !s.Differs() {
		return "= " + s.Item + ": " + SetupText(s.Ours) + " (as the report)"
	}
	mark := "~ "
	if s.Marked() {
		mark = "! "
	}
	return mark + s.Item + ": report " + SetupText(s.Report) + "; ours " + SetupText(s.Ours)
}

// SetupLegend says what Line's marks mean.
const SetupLegend = `setup beside the report's ("!" differs in the first claim's rows, "~" differs elsewhere, "=" as the report)`

// DifferencesText says how many setup items differ from the report's in
// the first claim's rows ("2 setup items differ from the report's"),
// empty when none does.
func DifferencesText(setup []Setup) string {
	switch n := FirstClaimDifferences(setup); n {
	case 0:
		return ""
	case 1:
		return "1 setup item differs from the report's"
	default:
		return fmt.Sprintf("%d setup items differ from the report's", n)
	}
}
