package loadgen

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// errMalformed is returned for an answer that is not HTTP/1.x; it counts
// as kind "other".
var errMalformed = errors.New("loadgen: malformed HTTP response")

// maxHeaderBytes bounds an answer's status line and headers.
const maxHeaderBytes = 64 << 10

// respParser frames HTTP/1.x answers from bytes as they arrive, for the
// event loop (engine_linux.go), which reads whatever the socket has and
// cannot block until a whole answer is in. It reads every answer whole:
// the headers, then the body by Content-Length, by chunks (trailers
// included), or to the end of the connection; 1xx answers are skipped.
// Bodies are counted, not kept.
type respParser struct {
	head      bool // the request was HEAD: no body, whatever the headers say
	state     int
	status    int
	remaining int64 // body or chunk bytes still to come
	close     bool  // the connection ends after this answer
}

const (
	psHeader = iota
	psBody
	psChunkSize
	psChunkData
	psChunkEnd
	psTrailer
	psUntilClose
	psDone
)

// reset prepares p for the next answer.
func (p *respParser) reset(head bool) { *p = respParser{head: head} }

// feed consumes what it can of b and returns how many bytes it consumed and
// whether the answer is complete. It consumes nothing when b does not hold
// enough to go on; call it again with more.
func (p *respParser) feed(b []byte) (n int, done bool, err error) {
	for p.state != psDone {
		rest := b[n:]
		switch p.state {
		case psHeader:
			end := headerEnd(rest)
			if end < 0 {
				if len(rest) > maxHeaderBytes {
					return n, false, fmt.Errorf("%w: headers longer than %d bytes", errMalformed, maxHeaderBytes)
				}
				return n, false, nil
			}
			if err := p.parseHeader(rest[:end]); err != nil {
				return n, false, err
			}
			n += end
		case psBody:
			k := min(int64(len(rest)), p.remaining)
			n += int(k)
			if p.remaining -= k; p.remaining > 0 {
				return n, false, nil
			}
			p.state = psDone
		case psChunkSize:
			line, k := cutLine(rest)
			if k < 0 {
				if len(rest) > 4096 {
					return n, false, fmt.Errorf("%w: chunk size line too long", errMalformed)
				}
				return n, false, nil
			}
			if i := bytes.IndexByte(line, ';'); i >= 0 {
				line = line[:i]
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
			if err != nil || size < 0 {
				return n, false, fmt.Errorf("%w: chunk size %q", errMalformed, line)
			}
			n += k
			if size == 0 {
				p.state = psTrailer
			} else {
				p.remaining, p.state = size, psChunkData
			}
		case psChunkData:
			k := min(int64(len(rest)), p.remaining)
			n += int(k)
			if p.remaining -= k; p.remaining > 0 {
				return n, false, nil
			}
			p.state = psChunkEnd
		case psChunkEnd:
			line, k := cutLine(rest)
			if k < 0 {
				if len(rest) >= 2 {
					return n, false, fmt.Errorf("%w: no CRLF after a chunk", errMalformed)
				}
				return n, false, nil
			}
			if len(line) != 0 {
				return n, false, fmt.Errorf("%w: no CRLF after a chunk", errMalformed)
			}
			n += k
			p.state = psChunkSize
		case psTrailer:
			line, k := cutLine(rest)
			if k < 0 {
				if len(rest) > maxHeaderBytes {
					return n, false, fmt.Errorf("%w: trailers longer than %d bytes", errMalformed, maxHeaderBytes)
				}
				return n, false, nil
			}
			n += k
			if len(line) == 0 {
				p.state = psDone
			}
		case psUntilClose:
			return len(b), false, nil
		}
	}
	return n, true, nil
}

// eof tells p the connection ended; it reports whether that completed the
// answer (a body that runs to the end of the connection).
func (p *respParser) eof() bool {
	if p.state == psUntilClose {
		p.state = psDone
		return true
	}
	return false
}

// headerEnd returns the length of the header block at the start of b,
// through its blank line (CRLF CRLF, or bare LFs as lenient parsers
// accept), or -1 when b does not hold it all yet.
func headerEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		case i >= len(b) || (b[i] == '\r' && i+1 >= len(b)):
			return -1
		}
	}
}

// cutLine returns the first line of b without its line end, and the bytes
// through the line end; -1 when b holds no whole line.
func cutLine(b []byte) ([]byte, int) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, -1
	}
	return bytes.TrimSuffix(b[:i], []byte("\r")), i + 1
}

// parseHeader reads the status line and the headers that frame the body.
func (p *respParser) parseHeader(h []byte) error {
	line, k := cutLine(h)
	if k < 0 || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return fmt.Errorf("%w: status line %q", errMalformed, truncate(line))
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil || code < 100 || code > 999 || (len(line) > 12 && line[12] != ' ') {
		return fmt.Errorf("%w: status line %q", errMalformed, truncate(line))
	}
	http10 := line[7] == '0'
	var length int64 = -1
	chunked, keepAlive, closeConn := false, false, false
	for h = h[k:]; len(h) > 0; {
		line, k = cutLine(h)
		h = h[k:]
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return fmt.Errorf("%w: header line %q", errMalformed, truncate(line))
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "Content-Length"):
			n, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || n < 0 || (length >= 0 && n != length) {
				return fmt.Errorf("%w: Content-Length %q", errMalformed, value)
			}
			length = n
		case asciiEqualFold(name, "Transfer-Encoding"):
			chunked = chunked || hasToken(value, "chunked")
		case asciiEqualFold(name, "Connection"):
			closeConn = closeConn || hasToken(value, "close")
			keepAlive = keepAlive || hasToken(value, "keep-alive")
		}
	}
	if code >= 100 && code < 200 {
		if code == 101 {
			return fmt.Errorf("%w: 101 Switching Protocols", errMalformed)
		}
		return nil // an interim answer: the real one follows
	}
	p.status = code
	p.close = closeConn || (http10 && !keepAlive)
	switch {
	case p.head || code == 204 || code == 304:
		p.state = psDone
	case chunked:
		p.state = psChunkSize
	case length >= 0:
		p.remaining, p.state = length, psBody
		if length == 0 {
			p.state = psDone
		}
	default:
		p.state, p.close = psUntilClose, true
	}
	return nil
}

func truncate(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// asciiEqualFold reports whether b equals s, ignoring ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// hasToken reports whether the comma-separated list v holds token.
func hasToken(v []byte, token string) bool {
	for len(v) > 0 {
		var t []byte
		t, v, _ = bytes.Cut(v, []byte(","))
		if asciiEqualFold(bytes.TrimSpace(t), token) {
			return true
		}
	}
	return false
}
