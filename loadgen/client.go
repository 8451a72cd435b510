package loadgen

import (
	"bufio"
	"crypto/tls"
	"net"
	"time"

	"github.com/valyala/fasthttp"
)

// userAgent is sent when no User-Agent header was given.
const userAgent = "hlab-loadgen"

// client is one worker's HTTP/1.1 keep-alive connection. A worker owns its
// client for its whole life and uses it for one request at a time, so
// nothing here is shared or locked: no connection pool to acquire from (as
// fasthttp's HostClient has), one deadline set per request, and the buffers
// allocated once. Requests and answers are written and parsed by fasthttp's
// own Request.Write and Response.Read, the code its HostClient runs, so every
// answer is read whole (body included) and checked as it would be there.
type client struct {
	r    *runner
	tls  *tls.Config // nil for http
	conn net.Conn    // nil until dialed, and after an error or Connection: close
	br   *bufio.Reader
	bw   *bufio.Writer
}

const bufSize = 16 << 10

func (r *runner) newClient() *client {
	return &client{r: r, tls: r.tlsConfig}
}

// do sends req and reads its answer into resp, all before deadline (dialing
// and the TLS handshake included). On any error the connection is closed,
// so the next request dials a fresh one; nothing is retried.
func (c *client) do(req *fasthttp.Request, resp *fasthttp.Response, deadline time.Time) error {
	if c.conn == nil {
		if err := c.dial(deadline); err != nil {
			return err
		}
	}
	if err := c.conn.SetDeadline(deadline); err != nil {
		c.close()
		return err
	}
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		c.close()
		return err
	}
	resp.Reset()
	// A HEAD answer announces a body it does not carry.
	resp.SkipBody = req.Header.IsHead()
	resp.Header.DisableNormalizing()
	if err := resp.Read(c.br); err != nil {
		c.close()
		return err
	}
	if req.ConnectionClose() || resp.ConnectionClose() {
		c.close()
	}
	return nil
}

func (c *client) dial(deadline time.Time) error {
	conn, err := c.r.tracker.dial(c.r.c.addr, deadline)
	if err != nil {
		return err
	}
	if c.tls != nil {
		tc := tls.Client(conn, c.tls)
		if err := tc.SetDeadline(deadline); err != nil {
			_ = conn.Close()
			return err
		}
		if err := tc.Handshake(); err != nil {
			_ = conn.Close()
			return err
		}
		conn = tc
	}
	c.conn = conn
	if c.br == nil {
		c.br, c.bw = bufio.NewReaderSize(conn, bufSize), bufio.NewWriterSize(conn, bufSize)
	} else {
		c.br.Reset(conn)
		c.bw.Reset(conn)
	}
	return nil
}

// close closes the connection, if any; the next do dials a new one.
func (c *client) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// clientTLS returns the TLS configuration for an https target: the given
// one (or a default) with the server name taken from the URL when unset,
// as fasthttp's HostClient does.
func clientTLS(c *cfg) *tls.Config {
	if !c.isTLS {
		return nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsConfig != nil {
		t = c.tlsConfig.Clone()
	}
	if t.ServerName == "" {
		if host, _, err := net.SplitHostPort(c.addr); err == nil {
			t.ServerName = host
		}
	}
	return t
}
