package replica

// CrashBeforeRename makes every restart file write fail after its
// temporary file is written and before the rename, as a process that
// dies there would; the function it returns undoes it.
func CrashBeforeRename(crash func() error) (undo func()) {
	crashBeforeRename.Store(&crash)
	return func() { crashBeforeRename.Store(nil) }
}
