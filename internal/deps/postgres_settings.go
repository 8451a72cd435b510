package deps

import (
	"slices"
	"strings"
)

// SettingsLine describes the settings the server runs with, for a lab
// run's environment: each setting the lab set (or, on an external server,
// read), "name=value" in name order, without the connection's own (port,
// socket directory, listen address), then what the rest are.
func (p *Postgres) SettingsLine() string {
	var parts []string
	for k, v := range p.Settings {
		switch k {
		case "port", "unix_socket_directories", "listen_addresses":
			continue
		}
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	rest := "others at Postgres' defaults (shared_buffers 128MB)"
	if p.External() {
		rest = "read from the external server; others as it is configured"
	}
	return strings.Join(parts, ", ") + "; " + rest
}
