// Package depsctl runs real dependencies standalone, in the background,
// for a user who wants them outside the lab: hlab deps up, down and ps.
//
// Up re-executes the hlab binary as a detached supervisor (a new session,
// its output in supervisor.log in the dependency's state directory) that
// starts the dependency through internal/deps under a sandbox, writes
// state.json (its pid, the dependency's, the connection string) once the
// dependency answers, and on SIGTERM stops it and exits. Up waits for
// that file, or for the supervisor's death, whose log tail is then the
// error. Down sends the supervisor SIGTERM, waits, and kills what is left
// after a bound; the data stays in the state directory (Purge removes it)
// and the client port is remembered there, so a later Up serves the same
// data at the same connection string.
//
//	s, started, err := depsctl.Up(ctx, "postgres", depsctl.Options{Log: os.Stderr})
//	fmt.Println(s.Conn) // postgres://postgres:...@127.0.0.1:PORT/postgres?sslmode=disable
//	_, err = depsctl.Down("postgres", depsctl.Options{}, false)
package depsctl
