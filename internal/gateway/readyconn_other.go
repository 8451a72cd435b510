//go:build !linux

package gateway

const readyReadSupported = false

func sysRead(uintptr, []byte) (int, error) { panic("gateway: ReadOnReady is Linux-only") }

func wouldBlock(error) bool { panic("gateway: ReadOnReady is Linux-only") }
