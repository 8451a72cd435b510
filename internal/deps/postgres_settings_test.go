package deps

import "testing"

func TestSettingsLine(t *testing.T) {
	p := &Postgres{Settings: map[string]string{"port": "5432", "unix_socket_directories": "/tmp/x", "listen_addresses": "127.0.0.1",
		"fsync": "on", "wal_level": "logical"}}
	if got, want := p.SettingsLine(), "fsync=on, wal_level=logical; others at Postgres' defaults (shared_buffers 128MB)"; got != want {
		t.Errorf("SettingsLine() = %q, want %q", got, want)
	}
}
