package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// authFiles holds what was last read from the auth files, for the
// connections and streams to come; Reload replaces it whole or not at
// all (a file that does not parse keeps the last good one, and says so).
type authFiles struct {
	names  AuthFiles
	tokens atomic.Pointer[Tokens]
	tls    atomic.Pointer[tls.Config] // the certificate and client CAs

	mu    sync.Mutex
	stamp string // the files' identity and mtime at the last load
}

// load reads the files; on an error it changes nothing.
func (f *authFiles) load() error {
	stamp := f.stampNow()
	var (
		ts  *Tokens
		cfg *tls.Config
		err error
	)
	n := f.names
	if n.TLSCert != "" || n.TLSKey != "" || n.TLSClientCA != "" {
		if cfg, err = ServerTLS(n.TLSCert, n.TLSKey, n.TLSClientCA); err != nil {
			return err
		}
	}
	if n.Tokens != "" {
		if ts, err = LoadTokens(n.Tokens); err != nil {
			return err
		}
	}
	f.tokens.Store(ts)
	f.tls.Store(cfg)
	f.mu.Lock()
	f.stamp = stamp
	f.mu.Unlock()
	return nil
}

// serverTLS is the TLS configuration the server keeps: each handshake
// takes the certificate and client CAs last read.
func (f *authFiles) serverTLS() *tls.Config {
	first := f.tls.Load()
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		ClientAuth: first.ClientAuth, // fixed by the flags; logMode reads it
		NextProtos: []string{"h2"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return f.tls.Load(), nil
		},
	}
}

// stampNow identifies the files as they are now: a file replaced (a new
// inode, as a rename or a Kubernetes secret update does) or written (a
// new mtime or size) changes it.
func (f *authFiles) stampNow() string {
	var b strings.Builder
	for _, name := range []string{f.names.TLSCert, f.names.TLSKey, f.names.TLSClientCA, f.names.Tokens} {
		if name == "" {
			continue
		}
		fi, err := os.Stat(name)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", name)
			continue
		}
		ino := uint64(0)
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		fmt.Fprintf(&b, "%s:%d:%d:%d;", name, ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// changed reports whether the files differ from those last loaded.
func (f *authFiles) changed() bool {
	now := f.stampNow()
	f.mu.Lock()
	defer f.mu.Unlock()
	return now != f.stamp
}

// Reload reads a's files again (an Auth that AuthFiles.Load made): new
// connections get the certificate and client CAs read, new streams the
// tokens. Connections and streams open keep going, under their token
// name's new quota (a changed publish rate applies at once). On an error
// nothing changes.
func (a *Auth) Reload() error {
	if a == nil || a.files == nil {
		return nil
	}
	if err := a.files.load(); err != nil {
		return err
	}
	a.callers.apply(a.tokens())
	return nil
}

// DefaultReloadEvery is how often Watch looks whether the auth files
// changed.
const DefaultReloadEvery = 5 * time.Second

// Watch reloads a's files when they change (it looks every `every`) or
// when hup delivers (SIGHUP), until ctx ends, logging each reload and
// counting it in reg.
func (a *Auth) Watch(ctx context.Context, hup <-chan os.Signal, every time.Duration, reg prometheus.Registerer, log *slog.Logger) {
	if a == nil || a.files == nil {
		return
	}
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_auth_reloads_total",
		Help: "Reloads of the TLS and tokens files (on a change or SIGHUP), by result: ok, or failed (the files last read stay in force).",
	}, []string{"result"})
	registerOrReuse(reg, &reloads)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		why := ""
		select {
		case <-ctx.Done():
			return
		case <-hup:
			why = "SIGHUP"
		case <-t.C:
			if !a.files.changed() {
				continue
			}
			why = "a file changed"
		}
		if err := a.Reload(); err != nil {
			reloads.WithLabelValues("failed").Inc()
			log.Error("databus: the auth files did not reload; the ones read before stay in force", "why", why, "err", err)
			continue
		}
		reloads.WithLabelValues("ok").Inc()
		log.Info("databus: auth files reloaded", "why", why, "tokens", a.tokens().Len())
	}
}
