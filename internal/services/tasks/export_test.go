package tasks

import "time"

// ListenerPing makes the event listener of a service built with c ping
// its connection after d of silence, and give up on it when the ping
// takes d.
func ListenerPing(c *Config, d time.Duration) { c.listenerPing = d }

// Patterns returns the ServeMux pattern of every route of the API, from
// the one table that serves them.
func (s *Service) Patterns() []string {
	var ps []string
	for _, rt := range s.routeTable() {
		ps = append(ps, rt.pattern)
	}
	return ps
}
