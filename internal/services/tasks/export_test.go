package tasks

// Patterns returns the ServeMux pattern of every route of the API, from
// the one table that serves them.
func (s *Service) Patterns() []string {
	var ps []string
	for _, rt := range s.routeTable() {
		ps = append(ps, rt.pattern)
	}
	return ps
}
