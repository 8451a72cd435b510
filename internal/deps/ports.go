package deps

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// onPorts is OnFreePorts with the first port fixed when port is not 0: a
// standalone dependency keeps its address across restarts, so the string
// a user connects with stays the same. A fixed port that is taken is an
// error (wrapping ErrPortTaken), not a reason to move; the other ports
// are free ones, chosen anew each time.
func onPorts(ctx context.Context, port, n int, start func(ports []int) error) error {
	if port == 0 {
		return OnFreePorts(ctx, n, start)
	}
	var err error
	for range portAttempts {
		var ports []int
		if ports, err = freePorts(n); err != nil {
			return err
		}
		for i, p := range ports[1:] {
			if p == port { // the fixed port goes first, and only once
				ports[i+1] = 0
			}
		}
		if ports = compactPorts(port, ports[1:]); len(ports) < n {
			continue // a free port was the fixed one: try another set
		}
		if err = start(ports); err == nil || !PortTaken(err) || ctx.Err() != nil {
			return err
		}
		if !portFree(port) {
			return fmt.Errorf("%w: 127.0.0.1:%d, the port this dependency had before, is in use by another process (free it, or start it in a new state directory)", ErrPortTaken, port)
		}
	}
	return err
}

// compactPorts returns first followed by the non-zero ports of rest.
func compactPorts(first int, rest []int) []int {
	out := []int{first}
	for _, p := range rest {
		if p != 0 {
			out = append(out, p)
		}
	}
	return out
}

// portFree reports whether 127.0.0.1:port can be bound now.
func portFree(port int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}
