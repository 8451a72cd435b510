package gateway

import "syscall"

// readyReadSupported: grpc-go reads sockets with ReadOnReady on Linux
// only, and so does the gateway.
const readyReadSupported = true

// sysRead reads with the syscall package, as net does, not x/sys/unix:
// the race detector would see the two packages' reads and writes of one
// socket as unordered.
func sysRead(fd uintptr, p []byte) (int, error) { return syscall.Read(int(fd), p) }

func wouldBlock(err error) bool { return err == syscall.EAGAIN || err == syscall.EWOULDBLOCK }
