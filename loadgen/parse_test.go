package loadgen

import (
	"errors"
	"testing"
)

// parseAll feeds in to a parser in pieces of size step (0: all at once),
// as a socket might deliver it, and returns the status, whether the answer
// completed, the bytes it consumed and whether the connection closes.
func parseAll(in string, head, eof bool, step int) (status int, done bool, used int, closeConn bool, err error) {
	var p respParser
	p.reset(head)
	var buf []byte
	for i := 0; i < len(in) || step == 0; {
		end := len(in)
		if step > 0 {
			end = min(i+step, len(in))
		}
		buf = append(buf, in[i:end]...)
		i = end
		n, d, err := p.feed(buf)
		if err != nil {
			return 0, false, 0, false, err
		}
		used += n
		buf = buf[n:]
		if d {
			return p.status, true, used, p.close, nil
		}
		if step == 0 {
			break
		}
	}
	if eof && p.eof() {
		return p.status, true, used, p.close, nil
	}
	return p.status, false, used, p.close, nil
}

func TestRespParser(t *testing.T) {
	for _, tc := range []struct {
		name, in  string
		head, eof bool
		status    int
		done, cls bool
		used      int // -1: all of in
		malformed bool
	}{
		{name: "content-length", in: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n", status: 200, done: true, used: -1},
		{name: "case and spaces", in: "HTTP/1.1 404 Not Found\r\ncontent-length:   3 \r\nX: y\r\n\r\nabc", status: 404, done: true, used: -1},
		{name: "no reason phrase", in: "HTTP/1.1 204\r\n\r\n", status: 204, done: true, used: -1},
		{name: "zero length", in: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", status: 200, done: true, used: -1},
		{name: "leaves the next answer", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1", status: 200, done: true, used: 40},
		{name: "incomplete body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", status: 200, done: false, used: -1},
		{name: "incomplete header", in: "HTTP/1.1 200 OK\r\nContent-Len", done: false, used: 0},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n\n\r\n0\r\n\r\n", status: 200, done: true, used: -1},
		{name: "chunked with trailers", in: "HTTP/1.1 500 x\r\nTransfer-Encoding: gzip, Chunked\r\n\r\nA\r\n0123456789\r\n0\r\nT: v\r\n\r\n", status: 500, done: true, used: -1},
		{name: "chunked incomplete", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", status: 200, done: false, used: -1},
		{name: "HEAD ignores length", in: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", head: true, status: 200, done: true, used: -1},
		{name: "304 has no body", in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", status: 304, done: true, used: -1},
		{name: "interim 100 skipped", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", status: 201, done: true, used: -1},
		{name: "connection close", in: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", status: 200, done: true, cls: true, used: -1},
		{name: "HTTP/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", status: 200, done: true, cls: true, used: -1},
		{name: "HTTP/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx", status: 200, done: true, used: -1},
		{name: "body to the end of the connection", in: "HTTP/1.1 200 OK\r\n\r\nall of it", eof: true, status: 200, done: true, cls: true, used: -1},
		{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", status: 200, done: true, used: -1},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH_9.2\r\n\r\n", malformed: true},
		{name: "bad status", in: "HTTP/1.1 2x0 OK\r\n\r\n", malformed: true},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", malformed: true},
		{name: "conflicting lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", malformed: true},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", malformed: true},
		{name: "no CRLF after chunk", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz", malformed: true},
		{name: "101", in: "HTTP/1.1 101 Switching Protocols\r\n\r\n", malformed: true},
	} {
		for _, step := range []int{0, 1, 3, 7} {
			status, done, used, cls, err := parseAll(tc.in, tc.head, tc.eof, step)
			if tc.malformed {
				if !errors.Is(err, errMalformed) {
					t.Errorf("%s (step %d): err %v, want malformed", tc.name, step, err)
				}
				continue
			}
			want := tc.used
			if want < 0 {
				want = len(tc.in)
			}
			if err != nil || status != tc.status || done != tc.done || cls != tc.cls || (done && used != want) {
				t.Errorf("%s (step %d): status %d done %v close %v used %d err %v; want %d %v %v %d",
					tc.name, step, status, done, cls, used, err, tc.status, tc.done, tc.cls, want)
			}
		}
	}
}
