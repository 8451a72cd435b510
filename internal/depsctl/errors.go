package depsctl

import "errors"

var (
	// ErrUnknownName is returned by Parse, Up and Down for a name that is
	// not a dependency; its message lists the names there are.
	ErrUnknownName = errors.New("depsctl: unknown dependency")

	// ErrSupervisorDied is returned by Up when the supervisor exited
	// before the dependency was ready; the error carries its log's tail.
	ErrSupervisorDied = errors.New("depsctl: the dependency did not start")
)
