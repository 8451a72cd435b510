package deps

import (
	"context"
	"errors"
	"strings"
)

// ErrPortTaken is wrapped by a start function of OnFreePorts whose server
// could not bind a port it was given: another process took it between
// its choice and the bind.
var ErrPortTaken = errors.New("deps: port taken before the server bound it")

// portAttempts is how many sets of ports OnFreePorts tries.
const portAttempts = 3

// OnFreePorts picks n distinct free ports on 127.0.0.1 and calls start
// with them. A port can be taken between its choice and the bind: when
// start's error says so (PortTaken), OnFreePorts calls start again with
// new ports, three sets at most, and stops early once ctx ends. start
// must clean up what a failed attempt left (a process, its storage) before
// it returns. It returns start's last error.
func OnFreePorts(ctx context.Context, n int, start func(ports []int) error) error {
	var err error
	for range portAttempts {
		var ports []int
		if ports, err = freePorts(n); err != nil {
			return err
		}
		if err = start(ports); err == nil || !PortTaken(err) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// PortTaken reports whether err says a server could not bind its port:
// it wraps ErrPortTaken, or its text carries the system's message
// ("Address already in use", as the JVM, Redis, Postgres and Go's net
// package word it), which start errors quote from the server's log.
func PortTaken(err error) bool {
	return err != nil && (errors.Is(err, ErrPortTaken) || strings.Contains(strings.ToLower(err.Error()), "address already in use"))
}

// freePorts returns n distinct free ports.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}
