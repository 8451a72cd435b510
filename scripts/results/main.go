// Command results publishes a lab run's results in the docs, so that
// what they say cannot drift from the run they come from. From one
// `hlab lab --json` file it writes:
//
//   - README.md, between its two results markers: the scoreboard (every
//     claim's verdict, ratio and interval, every target's verdict), with
//     the machine and the date of the run;
//   - docs/results/README.md, whole: the same run as the lab prints it
//     (package report's scoreboard and every experiment's table, notes,
//     targets, shown ratios and figures not rerun).
//
// The date is the run's own (the JSON's "started"); a file from before
// the lab recorded it needs the date given:
//
//	go run ./scripts/results -date 2026-11-26 docs/results/reference.json
//
// The README's begin marker records that very command, and the test
// beside this file reruns it from the marker and fails when either file
// differs from what it makes of the committed JSON: to publish another
// run, replace the JSON and rerun the command with that run's date.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/labresult"
	"github.com/highload-lab/hlab/internal/report"
)

// The files written, relative to the repository's root.
const (
	readmePath = "README.md"
	pagePath   = "docs/results/README.md"
)

// The README's markers. The begin marker holds the command that made the
// section, so that the test can make it again.
const (
	command     = "go run ./scripts/results"
	beginMarker = "<!-- begin results: " + command + " "
	endMarker   = "<!-- end results -->"
)

// config is what one publication is made from.
type config struct {
	root      string // the repository's root: where README.md is
	dateGiven bool   // -date was given: the JSON does not record the run's date
	date      string // when the run was made, YYYY-MM-DD: given, or the JSON's
	json      string // the lab run, relative to root
}

// args is the command line that makes c, as the begin marker records it.
func (c config) args() string {
	if c.dateGiven {
		return fmt.Sprintf("-date %s %s", c.date, c.json)
	}
	return c.json
}

func parse(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("results", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s [-date YYYY-MM-DD] FILE.json\n\n"+
			"Writes the scoreboard of FILE.json (hlab lab --json) into README.md between its results\n"+
			"markers, and the whole run into %s. Run it from the repository's root.\n\n", command, pagePath)
		fs.PrintDefaults()
	}
	var c config
	fs.StringVar(&c.date, "date", "", "the day the run was made, YYYY-MM-DD, for a JSON from before the lab recorded it (default: the JSON's started)")
	fs.StringVar(&c.root, "root", ".", "the repository's root")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() != 1 {
		return c, fmt.Errorf("results: give one lab run's JSON (hlab lab --json FILE), got %d arguments: %s FILE.json", fs.NArg(), command)
	}
	c.json = filepath.ToSlash(fs.Arg(0))
	if c.dateGiven = c.date != ""; c.dateGiven {
		if _, err := time.Parse(time.DateOnly, c.date); err != nil {
			return c, fmt.Errorf("results: -date %q: give the day the run was made as YYYY-MM-DD", c.date)
		}
	}
	return c, nil
}

// published is what one run makes: the README's section and the page.
type published struct {
	section string // between the markers, both excluded
	page    string
}

func publish(c config) (published, error) {
	doc, err := labresult.ReadJSONFile(filepath.Join(c.root, c.json))
	if err != nil {
		return published{}, err
	}
	if !c.dateGiven {
		if doc.Started.IsZero() {
			return published{}, fmt.Errorf("results: %s does not record when it ran (a file from an older hlab): give -date YYYY-MM-DD", c.json)
		}
		c.date = doc.Started.Format(time.DateOnly)
	}
	return published{section: section(c, doc), page: page(c, doc)}, nil
}

// runLine says which run it was and where: the date, the mode and the
// machine.
func runLine(c config, doc labresult.Document) string {
	var modes []string
	for _, e := range doc.Experiments {
		if !slices.Contains(modes, e.Mode) {
			modes = append(modes, e.Mode)
		}
	}
	m := doc.Machine
	machine := fmt.Sprintf("%d CPUs", m.CPUs)
	if m.CPUModel != "" {
		machine += " (" + m.CPUModel + ")"
	}
	machine += ", " + m.OS
	if m.Kernel != "" {
		machine += " " + m.Kernel
	}
	return fmt.Sprintf("run of %s in %s mode on %s, %s, CPU quotas by %s", c.date, strings.Join(modes, " and "), machine, m.Go, m.CPUQuota)
}

// section is the README's scoreboard: a table of claims, one of targets.
func section(c config, doc labresult.Document) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The reference %s. Every row, note and figure not rerun: [docs/results](%s).\n\n", runLine(c, doc), pagePath)
	b.WriteString("| claim | verdict | ratio [95% interval] | needs | pairs | report |\n|---|---|---|---|---|---|\n")
	for _, e := range doc.Experiments {
		name := experimentLink(c, e.Name)
		if len(e.Claims) == 0 {
			fmt.Fprintf(&b, "| %s: %s | %s | | | | |\n", name, cell(e.Error), labresult.VerdictWord(e))
		}
		for i, cl := range e.Claims {
			text := cl.Claim
			if i == 0 {
				setup := "the report's setup"
				if d := labresult.DifferencesText(e.Setup); d != "" {
					setup += "; " + d
				}
				text = "(" + setup + ") " + text
			}
			if cl.Why != "" && cl.Verdict == labresult.Invalid {
				text += " (INVALID: " + cl.Why + ")"
			}
			pairs := fmt.Sprint(cl.Pairs)
			if cl.NoisyPairs > 0 {
				pairs += fmt.Sprintf(" (%d noisy)", cl.NoisyPairs)
			}
			fmt.Fprintf(&b, "| %s #%d: %s | %s | %s | %s | %s | %s |\n", name, i+1, cell(text), cl.Verdict.Word(), figure(cl.Ratio, "", cl.CI), cl.Threshold, pairs, cell(cl.Report))
		}
	}
	var targets []string
	for _, e := range doc.Experiments {
		for _, t := range e.Targets {
			text := t.Target
			if t.Why != "" {
				text += " (" + t.Why + ")"
			}
			targets = append(targets, fmt.Sprintf("| %s: %s | %s | %s | %s |\n", experimentLink(c, e.Name), cell(text), t.Verdict.Word(), figure(t.Value, t.Unit, t.Spread), t.Bound))
		}
	}
	if len(targets) == 0 {
		b.WriteString("\nThis run held no figure to a target of ours.\n")
		return b.String()
	}
	b.WriteString("\n| target of ours | verdict | figure [spread] | needs |\n|---|---|---|---|\n")
	b.WriteString(strings.Join(targets, ""))
	return b.String()
}

// experimentPage is the path of an experiment's page from the root, ""
// when it has none.
func experimentPage(c config, name string) string {
	p := "docs/experiments/" + name + ".md"
	if _, err := os.Stat(filepath.Join(c.root, p)); err != nil {
		return ""
	}
	return p
}

// experimentLink names an experiment, linked to its page when it has one.
func experimentLink(c config, name string) string {
	if p := experimentPage(c, name); p != "" {
		return fmt.Sprintf("[%s](%s)", name, p)
	}
	return name
}

// figure is a value with its unit and range, as the lab's tables show
// figures (report.Num): "2.25 [2.03, 2.50]", "41.2 ms [38.0, 44.1]".
func figure(v *float64, unit string, between []float64) string {
	s := report.Num(v)
	switch {
	case v == nil:
	case unit == "x":
		s += unit
	case unit != "":
		s += " " + unit
	}
	if len(between) == 2 {
		s += " [" + report.Num(&between[0]) + ", " + report.Num(&between[1]) + "]"
	}
	return s
}

// cell makes text safe in a Markdown table's cell.
func cell(text string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(text)
}

// page is docs/results/README.md: the run as the lab prints it.
func page(c config, doc labresult.Document) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- made by %s %s; edit neither this file nor the JSON by hand -->\n", command, c.args())
	fmt.Fprintf(&b, "# Results of the reference run\n\nThe %s, as `hlab lab` printed it: ", runLine(c, doc))
	fmt.Fprintf(&b, "the scoreboard, then each experiment's rows beside the report's figures, its notes, targets and shown ratios, the report's figures it did not rerun, and each claim in detail. ")
	fmt.Fprintf(&b, "The run itself is [%s](%s); `hlab lab compare %s YOUR.json` puts a run of yours beside it ([comparing two runs](../comparing-runs.md)). ", filepath.Base(c.json), relTo(pagePath, c.json), c.json)
	fmt.Fprintf(&b, "How to read a verdict: [how the lab measures](../how-it-measures.md).\n\n")
	b.WriteString("## Scoreboard\n\n")
	textBlock(&b, func(w io.Writer) { report.WriteScoreboard(w, doc.Experiments) })
	for _, e := range doc.Experiments {
		fmt.Fprintf(&b, "\n## %s\n\n", e.Name)
		if p := experimentPage(c, e.Name); p != "" {
			fmt.Fprintf(&b, "What it runs: [the %s experiment](%s).\n\n", e.Name, relTo(pagePath, p))
		}
		textBlock(&b, func(w io.Writer) { report.WriteText(w, e) })
	}
	return b.String()
}

// textBlock writes what write prints as a fenced text block.
func textBlock(b *strings.Builder, write func(io.Writer)) {
	var text strings.Builder
	write(&text)
	b.WriteString("```text\n" + strings.TrimPrefix(text.String(), "\n") + "```\n")
}

// relTo is target's path relative to the directory of from (both
// relative to the root).
func relTo(from, target string) string {
	rel, err := filepath.Rel(filepath.Dir(from), target)
	if err != nil {
		return target
	}
	return filepath.ToSlash(rel)
}

// errNoMarkers is returned when README.md has not exactly one pair of
// results markers.
var errNoMarkers = errors.New("results: README.md needs one line starting " + beginMarker + "... -->, and a later line " + endMarker + ", where the results go")

// markers finds the README's begin marker line and returns what precedes
// the section, the section, what follows it, and the marker's arguments.
func markers(readme string) (head, body, tail, args string, err error) {
	lines := strings.SplitAfter(readme, "\n")
	begin, end := -1, -1
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, beginMarker):
			if begin >= 0 {
				return "", "", "", "", errNoMarkers
			}
			begin = i
		case strings.TrimRight(l, "\n") == endMarker:
			if end >= 0 {
				return "", "", "", "", errNoMarkers
			}
			end = i
		}
	}
	if begin < 0 || end < begin {
		return "", "", "", "", errNoMarkers
	}
	args = strings.TrimSuffix(strings.TrimPrefix(strings.TrimRight(lines[begin], "\n"), beginMarker), " -->")
	return strings.Join(lines[:begin], ""), strings.Join(lines[begin+1:end], ""), strings.Join(lines[end:], ""), args, nil
}

// write publishes c: the README's section and the page.
func write(c config) error {
	p, err := publish(c)
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(filepath.Join(c.root, readmePath))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	head, _, tail, _, err := markers(string(readme))
	if err != nil {
		return err
	}
	out := head + beginMarker + c.args() + " -->\n" + p.section + tail
	if err := os.WriteFile(filepath.Join(c.root, readmePath), []byte(out), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	pg := filepath.Join(c.root, pagePath)
	if err := os.MkdirAll(filepath.Dir(pg), 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(pg, []byte(p.page), 0o644); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return nil
}

// check makes the publication again from the command the README's
// marker records and reports where a file differs from it.
func check(root string) error {
	readme, err := os.ReadFile(filepath.Join(root, readmePath))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	_, body, _, args, err := markers(string(readme))
	if err != nil {
		return err
	}
	// Flags after the file would not be parsed: -root goes first.
	c, err := parse(append([]string{"-root", root}, strings.Fields(args)...), io.Discard)
	if err != nil {
		return fmt.Errorf("results: the README's marker %q: %w", args, err)
	}
	p, err := publish(c)
	if err != nil {
		return err
	}
	pg, err := os.ReadFile(filepath.Join(root, pagePath))
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	var errs []error
	if d := firstDiff(body, p.section); d != "" {
		errs = append(errs, fmt.Errorf("%s's results differ from what %s makes of %s: %s", readmePath, command, c.json, d))
	}
	if d := firstDiff(string(pg), p.page); d != "" {
		errs = append(errs, fmt.Errorf("%s differs from what %s makes of %s: %s", pagePath, command, c.json, d))
	}
	if len(errs) > 0 {
		errs = append(errs, fmt.Errorf("edit neither by hand: publish a run with %s %s", command, c.args()))
	}
	return errors.Join(errs...)
}

// firstDiff describes the first line where have differs from want, ""
// when they are equal.
func firstDiff(have, want string) string {
	if have == want {
		return ""
	}
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range max(len(h), len(w)) {
		var a, b string
		if i < len(h) {
			a = h[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d is\n\t%s\nwhere the run gives\n\t%s", i+1, a, b)
		}
	}
	return "they differ in line endings"
}

func run(args []string, stderr io.Writer) int {
	c, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = write(c)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "results: wrote %s (between its markers) and %s from %s\n", readmePath, pagePath, c.json)
	return 0
}

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }
