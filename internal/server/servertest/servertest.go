// Package servertest plays the slow clients that a service's timeouts
// must cut off, for the tests of internal/server and of the services
// that run on it.
//
//	answer, held, err := servertest.Trickle(addr, "POST", "/events", "application/json", "", 20*time.Second)
//	if err != nil {
//		t.Fatal(err)
//	}
//	if held {
//		t.Fatal("the server still holds a trickled body's connection after 20 s")
//	}
package servertest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Trickle sends a request to addr whose headers announce a body of 1000
// bytes (Content-Type contentType, none if ""), sends prefix at once, then
// a space a second: the body outlasts any read timeout shorter than ~1000
// s. It reads until the server closes the connection, or until limit
// passes and the server still holds it (held). answer is what the server
// sent before then. A connection the server resets counts as closed; err
// is only a failure to connect or to send the headers.
func Trickle(addr, method, path, contentType, prefix string, limit time.Duration) (answer []byte, held bool, err error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, false, err
	}
	defer conn.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: t\r\n", method, path)
	if contentType != "" {
		head += "Content-Type: " + contentType + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"Content-Length: 1000\r\n\r\n"+prefix); err != nil {
		return nil, false, err
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			if _, err := conn.Write([]byte{' '}); err != nil {
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(limit))
	answer, err = io.ReadAll(conn)
	return answer, errors.Is(err, os.ErrDeadlineExceeded), nil
}
