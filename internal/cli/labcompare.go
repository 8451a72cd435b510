package cli

import (
	"encoding/json"
	"fmt"

	"github.com/highload-lab/hlab/internal/labcompare"
	"github.com/highload-lab/hlab/internal/labresult"
)

// compareAction is the word after "hlab lab" that compares two runs
// instead of naming an experiment; no experiment may take it as a name.
const compareAction = "compare"

func runLabCompare(args []string, st *State) int {
	fs := newFlagSet(st, "lab compare", "hlab lab compare A.json B.json [--report DIR] [--json] [--fail-on-moved]", `
Compares two lab runs, each written by "hlab lab --json FILE": A before a
change, B after it. It prints, first, how many verdicts moved, of claims
and of targets (from A's to B's: "1 verdict moved: async #1 INCONCLUSIVE →
REPRODUCED"), and what differs in the environment (machine, Go, quotas,
dependency kinds and versions: what may explain a change in the figures);
then, per experiment, each claim's ratio, 95% interval and pairs in A and
B, B's ratio over A's (B/A) and their difference (B−A), and whether the
intervals overlap; each target's verdict and figure in A and B; the
report figures not rerun that one run lists and the other does not; and
each row's figures in A and B with B/A.

Is a difference noise? A row measured more than once keeps the spread of
its runs (each figure's min–max over them). A figure's change is
"within spread" when B's median lies within A's min–max, or A's within
B's: no larger than the runs of one lab differ among themselves. "OUTSIDE spread"
is a change the runs' own noise does not cover. Figures without a spread
(one run each) show B/A alone. A claim's two intervals "overlap" or are
"disjoint"; disjoint intervals, like a moved verdict, are a change beyond
the noise between its pairs.

Rows, claims and targets are matched by their keys, so rewording a label
changes nothing (a run from before keys existed is matched by labels and
claim texts). What one run has and the other lacks is marked added (only
in B) or removed (only in A). A figure a run did not measure is "—",
never a number.

Example:
  hlab lab scale --json before.json
  (change something)
  hlab lab scale --json after.json
  hlab lab compare before.json after.json --report cmp   # also cmp/compare.html

Exit status: 0 when compared (moved verdicts included), 1 with
--fail-on-moved when a verdict moved, a claim's or a target's (for CI), 2 when a file cannot be
read or is not a lab run's JSON.`)
	reportDir := fs.String("report", "", "also write the comparison as HTML to DIR/compare.html")
	asJSON := fs.Bool("json", false, "print the comparison as JSON instead of tables")
	failOnMoved := fs.Bool("fail-on-moved", false, "exit 1 when a claim's or a target's verdict moved (for CI)")
	files, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(files) != 2 {
		return fail(st, "lab compare", 2, fmt.Errorf("give two files written by hlab lab --json, A (before) and B (after), got %d: hlab lab compare A.json B.json", len(files)))
	}
	var docs [2]labresult.Document
	for i, path := range files {
		if docs[i], err = labresult.ReadJSONFile(path); err != nil {
			return fail(st, "lab compare", 2, fmt.Errorf("%w; give two files written by hlab lab --json FILE", err))
		}
	}
	c := labcompare.Compare(docs[0], docs[1], files[0], files[1])
	if *asJSON {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			return fail(st, "lab compare", 1, err)
		}
		fmt.Fprintf(st.Stdout, "%s\n", b)
	} else if err := labcompare.WriteText(st.Stdout, c); err != nil {
		return fail(st, "lab compare", 1, err)
	}
	if *reportDir != "" {
		path, err := labcompare.WriteHTML(*reportDir, c)
		if err != nil {
			return fail(st, "lab compare", 1, err)
		}
		fmt.Fprintf(st.Stderr, "hlab lab compare: wrote %s\n", path)
	}
	if *failOnMoved && len(c.Moved) > 0 {
		fmt.Fprintf(st.Stderr, "hlab lab compare: %s\n", c.MovedLine())
		return 1
	}
	return 0
}
