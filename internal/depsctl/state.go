package depsctl

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/procfs"
)

// State is what a running dependency's supervisor writes to state.json
// in its state directory once the dependency answers; the file goes when
// the supervisor stops it.
type State struct {
	Name string `json:"name"` // as given to Up: "postgres", "kafka@4.3.1"
	Kind string `json:"kind"` // what runs: "postgres 15.18", "kfake (embedded)"
	// PID is the supervisor's; DepPID the dependency's main process
	// (also its process group; a cluster's first broker), 0 for kfake,
	// which runs inside the supervisor.
	PID    int `json:"pid"`
	DepPID int `json:"dep_pid"`
	// Conn is the connection string Up prints.
	Conn string `json:"conn"`
	// Port is the client port, remembered across down and up.
	Port int `json:"port"`
	// Upstreams are nginx's (hlab deps up nginx --upstream).
	Upstreams []string  `json:"upstreams,omitempty"`
	StateDir  string    `json:"state_dir"`
	Started   time.Time `json:"started"`
}

const (
	stateFile = "state.json"
	portFile  = "port" // the client port, kept after down
	logFile   = "supervisor.log"
	dataDir   = "data" // the dependency's own directory
)

// DefaultRoot returns the directory that holds a state directory per
// dependency: $XDG_STATE_HOME/hlab/deps, else ~/.local/state/hlab/deps.
func DefaultRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "hlab", "deps"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("depsctl: no home directory for the state (set XDG_STATE_HOME or --state-dir): %w", err)
	}
	return filepath.Join(home, ".local", "state", "hlab", "deps"), nil
}

// stateDir returns dir made absolute, or with dir "" name's directory
// under DefaultRoot.
func stateDir(name, dir string) (string, error) {
	if dir == "" {
		root, err := DefaultRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, name)
	}
	return filepath.Abs(dir)
}

// readState returns the state in dir when its supervisor is alive; ok is
// false when nothing runs there (a state file left by a supervisor that
// was killed is removed).
func readState(dir string) (s State, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("depsctl: %w", err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return State{}, false, fmt.Errorf("depsctl: %s is not a state file (%v): remove it if nothing runs there", filepath.Join(dir, stateFile), err)
	}
	if !isSupervisor(s.PID) {
		os.Remove(filepath.Join(dir, stateFile))
		return State{}, false, nil
	}
	return s, true, nil
}

// writeState writes s to dir atomically: Up never reads half a file.
func writeState(dir string, s State) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("depsctl: state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, stateFile)); err != nil {
		return fmt.Errorf("depsctl: state: %w", err)
	}
	return nil
}

// rememberedPort returns the client port of a previous run in dir, 0 when
// there was none.
func rememberedPort(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		return 0
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return p
}

// isSupervisor reports whether pid is alive and a supervisor (hlab deps
// supervise), not a process that took a dead one's pid.
func isSupervisor(pid int) bool {
	if !procfs.Alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "deps\x00"+SuperviseCmd+"\x00")
}

// splitLines returns the non-blank lines of s, trimmed.
func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
