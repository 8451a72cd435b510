// Package grafana holds the Grafana dashboards of the services (the JSON
// files beside it, embedded here), the Prometheus side of them (the
// scrape config prometheus.yml and the alert rules in alerts/, embedded
// for "hlab deps up prometheus"), and what their tests need to read
// them: the dashboards, the metric names each one's PromQL queries use,
// and the queries with Grafana's variables filled in (Expand).
// dashboards_test.go starts each real service, drives some traffic,
// holds every dashboard and rule file against what the service's
// /metrics exports, and evaluates every dashboard query through a real
// Prometheus that scrapes them; alerts_test.go checks and tests the alert
// rules with promtool.
package grafana

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strings"
)

//go:embed *.json
var files embed.FS

// Dashboard is what the checks read of a Grafana dashboard's JSON.
type Dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel; a collapsed row holds its panels.
type Panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is one query of a panel.
type Target struct {
	Expr string `json:"expr"`
}

// Variable is a templating variable; a query variable's query may name a
// metric (label_values(metric, label)).
type Variable struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query any    `json:"query"` // a string, or {"query": "..."} in newer Grafana
	// IncludeAll offers "All", which puts AllValue in a query.
	IncludeAll bool   `json:"includeAll"`
	AllValue   string `json:"allValue"`
}

// Dashboards returns the embedded dashboards by file name.
func Dashboards() (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		out[path] = b
		return err
	})
	return out, err
}

// Parse reads a dashboard and checks its shape: valid JSON, a uid and a
// title, and at least one panel with a PromQL query.
func Parse(b []byte) (*Dashboard, error) {
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("grafana: not valid dashboard JSON: %w", err)
	}
	switch {
	case d.UID == "":
		return nil, errors.New("grafana: the dashboard has no uid")
	case d.Title == "":
		return nil, errors.New("grafana: the dashboard has no title")
	case len(d.Exprs()) == 0:
		return nil, errors.New("grafana: no panel has a query")
	}
	return &d, nil
}

// Exprs returns every PromQL expression of d: its panels' queries
// (rows' included) and its query variables' label_values selectors.
func (d *Dashboard) Exprs() []string {
	var out []string
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) != "" {
					out = append(out, t.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		if sel, ok := labelValuesSelector(q); ok {
			out = append(out, sel)
		}
	}
	return out
}

// labelValuesSelector returns the selector of a label_values(selector,
// label) variable query ("" when it names only a label).
var labelValuesRe = regexp.MustCompile(`^\s*label_values\(\s*(.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

func labelValuesSelector(q string) (string, bool) {
	m := labelValuesRe.FindStringSubmatch(q)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Metrics returns the metric names d's queries use, sorted, or the first
// query it cannot read.
func (d *Dashboard) Metrics() ([]string, error) {
	seen := map[string]bool{}
	for _, e := range d.Exprs() {
		names, err := MetricNames(e)
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// MetricNames returns the metric names a PromQL expression selects.
//
// It tokenizes rather than parses: the Prometheus parser
// (github.com/prometheus/prometheus/promql/parser) would bring the whole
// Prometheus server module into the graph for one test, and the
// dashboards' queries need only this: string literals, label matchers
// ({...}), ranges and subqueries ([...]), Grafana variables ($x, ${x},
// [[x]]) and the label lists of by/without/on/ignoring/group_left/
// group_right are dropped; numbers and durations are skipped; an
// identifier followed by "(" must be a known function or aggregation
// (an unknown one is an error, so a typo cannot pass as a metric); the
// keywords (and, or, unless, bool, offset, ...) are skipped; every other
// identifier is a metric name. What it does not support (the metric
// name as __name__="..." inside braces, UTF-8 quoted names) is refused
// when met, never misread.
func MetricNames(expr string) ([]string, error) {
	if strings.Contains(expr, "__name__") || strings.Contains(expr, `{"`) {
		return nil, fmt.Errorf("grafana: %q: select metrics by a plain name; __name__ matchers and quoted names are not supported", expr)
	}
	s := dropVariables(expr)
	var (
		out    []string
		prev   string // the previous identifier, for by (...) and friends
		parens int
	)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := stringEnd(s, i)
			if err != nil {
				return nil, fmt.Errorf("grafana: %q: %w", expr, err)
			}
			i = end + 1
			prev = ""
		case c == '{' || c == '[':
			end, err := closing(s, i)
			if err != nil {
				return nil, fmt.Errorf("grafana: %q: %w", expr, err)
			}
			i = end + 1
		case c == '(' && labelListKeywords[prev]:
			end, err := closing(s, i) // a list of label names
			if err != nil {
				return nil, fmt.Errorf("grafana: %q: %w", expr, err)
			}
			i = end + 1
			prev = ""
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			j := i
			for j < len(s) && (isIdent(s[j]) || s[j] == '.') {
				j++ // 0.99, 1e3, 0x1f, 5m
			}
			i = j
			prev = ""
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n') {
				k++
			}
			call := k < len(s) && s[k] == '('
			switch {
			case keywords[word]:
			case call && functions[word]:
			case aggregations[word] && (hasWordAt(s, k, "by") || hasWordAt(s, k, "without")):
				// sum by (le) (...)
			case call:
				return nil, fmt.Errorf("grafana: %q: unknown function %s", expr, word)
			default:
				out = append(out, word)
			}
			prev = word
			i = j
		default:
			switch c {
			case '(':
				parens++
			case ')':
				if parens--; parens < 0 {
					return nil, fmt.Errorf("grafana: %q: unbalanced )", expr)
				}
			}
			if c != ' ' && c != '\t' && c != '\n' {
				prev = ""
			}
			i++
		}
	}
	if parens != 0 {
		return nil, fmt.Errorf("grafana: %q: unbalanced (", expr)
	}
	return out, nil
}

// hasWordAt reports whether the identifier w starts at s[i].
func hasWordAt(s string, i int, w string) bool {
	return strings.HasPrefix(s[i:], w) && (i+len(w) == len(s) || !isIdent(s[i+len(w)]))
}

// closing returns the index of the bracket closing the one at s[i].
func closing(s string, i int) (int, error) {
	open, want := s[i], map[byte]byte{'{': '}', '[': ']', '(': ')'}[s[i]]
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end, err := stringEnd(s, j)
			if err != nil {
				return 0, err
			}
			j = end
		case open:
			depth++
		case want:
			depth--
			if depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("unclosed %c", open)
}

// stringEnd returns the index of the quote closing the string that
// starts at s[i]; backslashes escape in "..." and '...', not in `...`.
func stringEnd(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j, nil
		}
	}
	return 0, errors.New("unterminated string")
}

// variableRe matches Grafana's variables: $name, ${name}, ${name:format}
// and [[name]].
var variableRe = regexp.MustCompile(`\$\{[^}]*\}|\$[a-zA-Z_][a-zA-Z0-9_]*|\[\[[^\]]*\]\]`)

// dropVariables replaces Grafana's variables by a placeholder that reads
// as a number, wherever they stand (a range, a matcher, a quantile).
func dropVariables(s string) string { return variableRe.ReplaceAllString(s, "0") }

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || c == ':' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdent(c byte) bool      { return isIdentStart(c) || isDigit(c) }

// labelListKeywords take a parenthesized list of label names.
var labelListKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var keywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"start": true, "end": true, "inf": true, "nan": true, "Inf": true, "NaN": true,
}

// aggregations are PromQL's aggregation operators.
var aggregations = setOf("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
	"bottomk", "topk", "quantile", "limitk", "limit_ratio")

// functions are PromQL's functions and aggregation operators.
var functions = setOf(append([]string{
	"abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
	"day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp", "floor",
	"histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev",
	"histogram_stdvar", "histogram_sum", "holt_winters", "double_exponential_smoothing", "hour", "idelta",
	"increase", "irate", "label_join", "label_replace", "ln", "log2", "log10", "minute", "month",
	"predict_linear", "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sort_by_label",
	"sort_by_label_desc", "sqrt", "time", "timestamp", "vector", "year",
	"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
	"quantile_over_time", "stddev_over_time", "stdvar_over_time", "last_over_time", "present_over_time",
	"mad_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "sin", "sinh",
	"tan", "tanh", "deg", "rad", "pi",
}, keys(aggregations)...)...)

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// Missing returns the metric names d uses that exported (the names of a
// scrape's series: a histogram family h exports h_bucket, h_sum and
// h_count) lacks.
func (d *Dashboard) Missing(exported map[string]bool) ([]string, error) {
	names, err := d.Metrics()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		if !exported[n] {
			out = append(out, n)
		}
	}
	return out, nil
}
