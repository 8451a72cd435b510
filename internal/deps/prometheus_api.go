package deps

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// promAPITimeout bounds one call of Prometheus' HTTP API when the
// caller's context has no deadline.
const promAPITimeout = 10 * time.Second

// PromSample is one series of an instant query's result: its labels and
// its value as Prometheus writes it ("0.25", "NaN", "+Inf").
type PromSample struct {
	Metric map[string]string `json:"metric"`
	Value  string
}

// UnmarshalJSON reads Prometheus' [unix time, "value"] pair.
func (s *PromSample) UnmarshalJSON(b []byte) error {
	var raw struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	s.Metric = raw.Metric
	s.Value, _ = raw.Value[1].(string)
	return nil
}

// PromRuleGroup is a rule group as /api/v1/rules shows it: each rule's
// health is "ok" once it evaluated without error, "err" with lastError
// when it did not, "unknown" before its first evaluation.
type PromRuleGroup struct {
	Name  string `json:"name"`
	File  string `json:"file"`
	Rules []struct {
		Name      string `json:"name"`
		Type      string `json:"type"` // "alerting" or "recording"
		Health    string `json:"health"`
		LastError string `json:"lastError"`
		State     string `json:"state"` // an alert's: inactive, pending, firing
	} `json:"rules"`
}

// QueryPrometheus evaluates the PromQL expression expr at the current
// time through the HTTP API of the Prometheus server at baseURL
// (http://host:port) and returns the series of its instant vector (a
// scalar comes back as one series without labels).
func QueryPrometheus(ctx context.Context, baseURL, expr string) ([]PromSample, error) {
	return QueryPrometheusAt(ctx, baseURL, expr, time.Time{})
}

// QueryPrometheusAt is QueryPrometheus at the time at (the zero time:
// now): what a graph showed then, from the samples the server holds.
func QueryPrometheusAt(ctx context.Context, baseURL, expr string, at time.Time) ([]PromSample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	if err := promAPI(ctx, baseURL, "/api/v1/query", params, &data); err != nil {
		return nil, fmt.Errorf("deps: prometheus query %q: %w", expr, err)
	}
	switch data.ResultType {
	case "vector":
		var out []PromSample
		err := json.Unmarshal(data.Result, &out)
		return out, err
	case "scalar", "string":
		var pair [2]any
		if err := json.Unmarshal(data.Result, &pair); err != nil {
			return nil, err
		}
		v, _ := pair[1].(string)
		return []PromSample{{Value: v}}, nil
	}
	return nil, fmt.Errorf("deps: prometheus query %q: a %s, not an instant vector: query a range only inside a function", expr, data.ResultType)
}

// PrometheusRules returns the rule groups the server at baseURL loaded,
// with each rule's health and state.
func PrometheusRules(ctx context.Context, baseURL string) ([]PromRuleGroup, error) {
	var data struct {
		Groups []PromRuleGroup `json:"groups"`
	}
	if err := promAPI(ctx, baseURL, "/api/v1/rules", nil, &data); err != nil {
		return nil, fmt.Errorf("deps: prometheus rules: %w", err)
	}
	return data.Groups, nil
}

// promAPI GETs path with params from the server at baseURL and decodes
// the envelope's data into out; an error envelope becomes an error with
// Prometheus' own words.
func promAPI(ctx context.Context, baseURL, path string, params url.Values, out any) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, promAPITimeout)
		defer cancel()
	}
	u := baseURL + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: not Prometheus' API (%s): %w", u, resp.Status, err)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s (%s): %s", env.ErrorType, resp.Status, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}
