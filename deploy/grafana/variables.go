package grafana

import (
	"fmt"
	"regexp"
	"time"
)

// Interpolation is what Expand puts in place of a query's variables, as
// Grafana would when it sends the query to Prometheus.
type Interpolation struct {
	// Vars are the dashboard's variables by name, each as Grafana writes
	// its current selection into a query: one value as it is; several in
	// a regex matcher as (a|b); All as the variable's allValue (Value
	// gives it).
	Vars map[string]string
	// ScrapeInterval is the data source's "Scrape interval" setting,
	// which should be Prometheus' scrape_interval (Grafana's default is
	// 15s).
	ScrapeInterval time.Duration
	// Interval is $__interval: the panel's time range over its width in
	// points, never below ScrapeInterval (0 = ScrapeInterval, as a
	// short range gives).
	Interval time.Duration
}

// builtinRe matches Grafana's global variables that Expand knows.
var builtinRe = regexp.MustCompile(`^__(rate_interval|interval|interval_ms)$`)

// Expand returns expr with Grafana's variables replaced the way Grafana
// replaces them before it sends a query to a Prometheus data source:
// $name, ${name} and [[name]] by in.Vars[name]; $__interval by
// in.Interval; $__interval_ms by it in milliseconds; $__rate_interval
// by max($__interval + scrape interval, 4 × scrape interval), Grafana's
// definition (a rate window that always holds at least four scrapes,
// hence two samples even when one scrape fails). A variable it does not
// know, and the ${name:format} form, are errors, never left in place.
func Expand(expr string, in Interpolation) (string, error) {
	if in.ScrapeInterval <= 0 {
		in.ScrapeInterval = 15 * time.Second
	}
	if in.Interval < in.ScrapeInterval {
		in.Interval = in.ScrapeInterval
	}
	var bad error
	out := variableRe.ReplaceAllStringFunc(expr, func(v string) string {
		name := variableName(v)
		if m := builtinRe.FindStringSubmatch(name); m != nil {
			switch m[1] {
			case "rate_interval":
				return promDuration(max(in.Interval+in.ScrapeInterval, 4*in.ScrapeInterval))
			case "interval":
				return promDuration(in.Interval)
			case "interval_ms":
				return fmt.Sprint(in.Interval.Milliseconds())
			}
		}
		val, ok := in.Vars[name]
		if !ok && bad == nil {
			bad = fmt.Errorf("grafana: %q: no value for the variable %s (formats such as ${x:csv} are not supported)", expr, v)
		}
		return val
	})
	return out, bad
}

// variableName returns the name in $name, ${name} or [[name]].
func variableName(v string) string {
	switch {
	case len(v) > 3 && v[:2] == "${":
		return v[2 : len(v)-1]
	case len(v) > 4 && v[:2] == "[[":
		return v[2 : len(v)-2]
	}
	return v[1:]
}

// promDuration writes d as PromQL reads a range: whole seconds, or
// milliseconds when it has a fraction of a second.
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// AllValue returns what Grafana writes into a query for the variable
// name with All selected: its allValue. Without one Grafana writes the
// regex of every value it found, which a test does not know: ok is
// false then.
func (d *Dashboard) AllValue(name string) (value string, ok bool) {
	for _, v := range d.Templating.List {
		if v.Name == name && v.IncludeAll && v.AllValue != "" {
			return v.AllValue, true
		}
	}
	return "", false
}
