package gateway

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/internal/secretfile"
)

// Auth is the gateway's optional authentication. Without it (nil, or the
// zero value) the gateway serves plaintext and anyone who reaches its
// port may publish to any topic and subscribe as any group. The two
// mechanisms combine: with both, a client needs a certificate and a token.
type Auth struct {
	// TLS, when set, serves TLS with it. With ClientAuth set to
	// tls.RequireAndVerifyClientCert (ServerTLS does that when given a
	// client CA) it is mutual TLS: a connection without a certificate
	// from ClientCAs is refused during the handshake. Any client with
	// such a certificate may do everything, unless Tokens narrows it.
	TLS *tls.Config
	// Tokens, when set, requires "authorization: Bearer <token>" on every
	// databus stream and allows only the topics and groups its token's
	// line lists (see ParseTokens). The gRPC health service's Check stays
	// open: it tells only whether the gateway serves; its Watch, which
	// holds a stream, needs a token.
	Tokens *Tokens

	// files is set by AuthFiles.Load: what Reload reads again.
	files *authFiles
}

// AuthFiles names the files Auth is read from: the gateway's flags
// --tls-cert, --tls-key, --tls-client-ca and --tokens. The zero value is
// no authentication.
type AuthFiles struct {
	TLSCert, TLSKey string
	TLSClientCA     string
	Tokens          string
}

// RegisterFlags adds --tls-cert, --tls-key, --tls-client-ca and --tokens to fs.
func (f *AuthFiles) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.TLSCert, "tls-cert", "", "serve TLS with this certificate (PEM; the chain, leaf first); needs --tls-key")
	fs.StringVar(&f.TLSKey, "tls-key", "", "the private key (PEM) of --tls-cert; refused if other users can read it (chmod 600, or 640 for the gateway's group)")
	fs.StringVar(&f.TLSClientCA, "tls-client-ca", "", "require client certificates issued by these CAs (PEM bundle): mutual TLS; needs --tls-cert")
	fs.StringVar(&f.Tokens, "tokens", "", "require a bearer token from this file on every stream, each allowed only its topics and groups (format: docs/systems/databus.md, \"Securing the gateway\"); refused if other users can read it. These files are read again when they change, or on SIGHUP")
}

// Load reads the files f names. It returns nil, and no error, when f
// names none. The Auth it returns reads them again on Reload (Watch calls
// it when they change, or on SIGHUP): a running gateway takes a rotated
// certificate or a new tokens file without a restart.
func (f AuthFiles) Load() (*Auth, error) {
	if f == (AuthFiles{}) {
		return nil, nil
	}
	files := &authFiles{names: f}
	if err := files.load(); err != nil {
		return nil, err
	}
	a := &Auth{files: files, Tokens: files.tokens.Load()}
	if f.TLSCert != "" || f.TLSKey != "" || f.TLSClientCA != "" {
		a.TLS = files.serverTLS()
	}
	return a, nil
}

// tokens are the tokens checked now: the last read, when loaded from
// files, else Tokens.
func (a *Auth) tokens() *Tokens {
	if a.files != nil {
		return a.files.tokens.Load()
	}
	return a.Tokens
}

// ServerTLS is the TLS configuration of a gateway serving certFile and
// keyFile (PEM), TLS 1.2 or later. With clientCAFile (a PEM bundle) it
// requires every client to present a certificate those CAs issued.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("gateway: TLS needs both --tls-cert and --tls-key (--tls-client-ca alone cannot serve TLS)")
	}
	if err := secretfile.Check(keyFile); err != nil {
		return nil, fmt.Errorf("gateway: --tls-key: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway: --tls-cert %s / --tls-key %s: %w", certFile, keyFile, err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	if clientCAFile != "" {
		pem, err := os.ReadFile(clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("gateway: --tls-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("gateway: --tls-client-ca %s holds no PEM certificate", clientCAFile)
		}
		c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// logMode says at start how clients are authenticated, and warns when
// they are not (or their tokens cross the network in the clear).
func (a *Auth) logMode(logger *slog.Logger) {
	const how = `see docs/systems/databus.md, "Securing the gateway"`
	switch {
	case a == nil:
		logger.Warn("databus gateway is UNAUTHENTICATED: anyone who reaches its gRPC port can publish to any topic and subscribe as any group; pass --tls-client-ca (mutual TLS) and/or --tokens, " + how)
		return
	case a.TLS == nil:
		logger.Warn("databus gateway checks bearer tokens over plaintext gRPC: tokens can be read off the network; pass --tls-cert and --tls-key too unless the network is encrypted already, " + how)
	case a.TLS.ClientAuth != tls.RequireAndVerifyClientCert && a.Tokens == nil:
		logger.Warn("databus gateway serves TLS but authenticates no one: any client can publish and subscribe; pass --tls-client-ca (mutual TLS) and/or --tokens, " + how)
	}
	logger.Info("databus gateway authentication",
		"tls", a.TLS != nil,
		"client_certificates", a.TLS != nil && a.TLS.ClientAuth == tls.RequireAndVerifyClientCert,
		"tokens", a.Tokens.Len())
}

// creds are a's transport credentials: TLS, or none (plaintext).
func (a *Auth) creds() credentials.TransportCredentials {
	if a == nil || a.TLS == nil {
		return insecure.NewCredentials()
	}
	return credentials.NewTLS(a.TLS)
}

// serverOptions are a's gRPC server options but its credentials (creds):
// the token check, refusals counted in reg.
func (a *Auth) serverOptions(reg prometheus.Registerer, logger *slog.Logger) []grpc.ServerOption {
	if a == nil {
		return nil
	}
	var opts []grpc.ServerOption
	if a.Tokens != nil {
		refused := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "databus_auth_refused_total",
			Help: "Streams refused by the token check, by gRPC code (Unauthenticated: no or an unknown token; PermissionDenied: a topic or group the token does not cover).",
		}, []string{"code"})
		registerOrReuse(reg, &refused)
		c := &tokenCheck{tokens: a.tokens, refused: refused, log: logger}
		opts = append(opts, grpc.ChainUnaryInterceptor(c.unary), grpc.ChainStreamInterceptor(c.stream))
	}
	return opts
}

// Tokens are the bearer tokens a gateway accepts and what each may do.
// Only their SHA-256 hashes are kept, and a presented token is compared
// with every one in constant time.
type Tokens struct {
	entries []token
}

type token struct {
	hash      [sha256.Size]byte
	line      int
	publish   patterns
	subscribe patterns
	groups    patterns
}

// Len is the number of tokens (0 for nil).
func (ts *Tokens) Len() int {
	if ts == nil {
		return 0
	}
	return len(ts.entries)
}

// LoadTokens reads a tokens file (see ParseTokens), which other users
// must not be able to read or change (secretfile.Check): it holds the
// tokens, or their hashes, and what each may do.
func LoadTokens(path string) (*Tokens, error) {
	f, err := secretfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: --tokens: %w", err)
	}
	defer f.Close()
	ts, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("gateway: --tokens %s: %w", path, err)
	}
	return ts, nil
}

// ParseTokens reads tokens, one a line: the token, then what it may do.
// Blank lines and lines starting with # are ignored.
//
//	# TOKEN                 PERMISSIONS
//	s3cret-billing          publish=invoices subscribe=orders groups=billing
//	sha256:9f86d081884c...  publish=orders.*
//	admin-token             publish=* subscribe=* groups=*
//
// TOKEN is the secret itself, or "sha256:" and the hex SHA-256 of it
// (printf %s "$TOKEN" | sha256sum), so the file need not hold secrets.
// The permissions, comma-separated lists:
//
//	publish=TOPICS    topics the token may publish to
//	subscribe=TOPICS  topics it may subscribe to
//	groups=GROUPS     consumer groups it may subscribe as (needed with subscribe=)
//
// "*" matches any name, and a name ending in "*" any name with that
// prefix. What a line does not list, the token may not do.
func ParseTokens(r io.Reader) (*Tokens, error) {
	ts := &Tokens{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		t, err := parseToken(fields)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		t.line = n
		for _, o := range ts.entries {
			if o.hash == t.hash {
				return nil, fmt.Errorf("line %d: the same token as line %d: give each token one line", n, o.line)
			}
		}
		ts.entries = append(ts.entries, t)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ts.entries) == 0 {
		return nil, errors.New("no tokens: every client would be refused; add a line \"TOKEN publish=... subscribe=... groups=...\"")
	}
	return ts, nil
}

func parseToken(fields []string) (token, error) {
	var t token
	secret := fields[0]
	if hexHash, ok := strings.CutPrefix(secret, "sha256:"); ok {
		b, err := hex.DecodeString(hexHash)
		if err != nil || len(b) != sha256.Size {
			return t, errors.New(`"sha256:" must be followed by 64 hex digits, the SHA-256 of the token`)
		}
		copy(t.hash[:], b)
	} else {
		for _, key := range []string{"publish=", "subscribe=", "groups="} {
			if strings.HasPrefix(secret, key) {
				return t, fmt.Errorf("%q is a permission: put the token first", secret)
			}
		}
		t.hash = sha256.Sum256([]byte(secret))
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok || val == "" {
			return t, fmt.Errorf("%q: give key=value, e.g. publish=orders,payments", f)
		}
		if seen[key] {
			return t, fmt.Errorf("%s= given twice: list every name in one, comma-separated", key)
		}
		seen[key] = true
		var p patterns
		for _, name := range strings.Split(val, ",") {
			if name == "" {
				return t, fmt.Errorf("%q: an empty name in the list", f)
			}
			p = append(p, name)
		}
		switch key {
		case "publish":
			t.publish = p
		case "subscribe":
			t.subscribe = p
		case "groups":
			t.groups = p
		default:
			return t, fmt.Errorf("unknown permission %q: use publish=, subscribe= and groups=", key)
		}
	}
	switch {
	case t.publish == nil && t.subscribe == nil:
		return t, errors.New("the token may do nothing: give publish=TOPICS and/or subscribe=TOPICS groups=GROUPS")
	case t.subscribe != nil && t.groups == nil:
		return t, errors.New("subscribe= needs groups=: the consumer groups the token may subscribe as (* for any)")
	case t.groups != nil && t.subscribe == nil:
		return t, errors.New("groups= without subscribe=: give the topics the token may subscribe to")
	}
	return t, nil
}

// patterns are names: "*" matches any, "prefix*" any with the prefix.
type patterns []string

func (ps patterns) allow(name string) bool {
	for _, p := range ps {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

// lookup returns the token whose hash matches secret's, or nil. Every
// entry is compared, in constant time, whether or not one matched: how
// long it takes says nothing about which token came close.
func (ts *Tokens) lookup(secret string) *token {
	h := sha256.Sum256([]byte(secret))
	var found *token
	for i := range ts.entries {
		if subtle.ConstantTimeCompare(h[:], ts.entries[i].hash[:]) == 1 {
			found = &ts.entries[i]
		}
	}
	return found
}

// tokenCheck is the interceptors of Auth.Tokens.
type tokenCheck struct {
	tokens  func() *Tokens // the tokens now
	refused *prometheus.CounterVec
	log     *slog.Logger
}

// healthCheck is the one method open without a token: it tells only
// whether the gateway serves. Watch, which holds a stream, needs one.
const healthCheck = "/grpc.health.v1.Health/Check"

// reflectionService is gRPC server reflection, v1 and v1alpha
// ("/grpc.reflection.v1.ServerReflection/", grpcurl tries both): it
// describes the API, which is public, but still needs a known token, so
// that a gateway with --tokens tells nothing to a stranger.
const reflectionService = "/grpc.reflection.v1"

func (c *tokenCheck) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.check(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *tokenCheck) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := c.check(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// check authenticates a call's token and authorizes its topics and group,
// read from the same metadata the stream's handler reads its settings from.
func (c *tokenCheck) check(ctx context.Context, method string) error {
	if method == healthCheck {
		return nil
	}
	err := c.authorize(ctx, method)
	if err != nil {
		code := status.Code(err)
		c.refused.WithLabelValues(code.String()).Inc()
		c.log.Debug("databus stream refused", "method", method, "code", code.String(), "error", err)
	}
	return err
}

func (c *tokenCheck) authorize(ctx context.Context, method string) error {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := md.Get("authorization")
	if len(auth) == 0 {
		return status.Error(codes.Unauthenticated, `databus: this gateway requires a token: send metadata "authorization: Bearer <token>" (Go client: databus.WithToken)`)
	}
	if len(auth) > 1 {
		return status.Error(codes.Unauthenticated, `databus: send one "authorization" metadata value, not several`)
	}
	scheme, secret, _ := strings.Cut(strings.TrimSpace(auth[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(secret) == "" {
		return status.Error(codes.Unauthenticated, `databus: "authorization" must be "Bearer <token>"`)
	}
	t := c.tokens().lookup(strings.TrimSpace(secret))
	if t == nil {
		return status.Error(codes.Unauthenticated, "databus: unknown token: ask the gateway's operator for a token listed in its --tokens file")
	}
	// Every value is checked, not only the first the handler uses, so no
	// second value can slip past.
	if strings.HasPrefix(method, reflectionService) || method == healthWatch {
		return nil // any token may read the API's description, or watch the health
	}
	topics := md.Get(MDTopic)
	switch method {
	case databusv1.DataBus_Publish_FullMethodName:
		for _, topic := range topics {
			if topic = strings.TrimSpace(topic); topic != "" && !t.publish.allow(topic) {
				return status.Errorf(codes.PermissionDenied, "databus: this token may not publish to topic %q: its line in the gateway's tokens file needs publish= to cover it", topic)
			}
		}
	case databusv1.DataBus_Subscribe_FullMethodName:
		for _, topic := range topics {
			if topic = strings.TrimSpace(topic); topic != "" && !t.subscribe.allow(topic) {
				return status.Errorf(codes.PermissionDenied, "databus: this token may not subscribe to topic %q: its line in the gateway's tokens file needs subscribe= to cover it", topic)
			}
		}
		// Dead letters are published: a topic named for them must be
		// the token's to publish to.
		for _, topic := range md.Get(databusv1.MDDeadLetterTopic) {
			if topic = strings.TrimSpace(topic); topic != "" && !t.publish.allow(topic) {
				return status.Errorf(codes.PermissionDenied, "databus: this token may not write dead letters to topic %q (metadata %q): its line in the gateway's tokens file needs publish= to cover it", topic, databusv1.MDDeadLetterTopic)
			}
		}
		for _, group := range md.Get(MDGroup) {
			if group = strings.TrimSpace(group); group != "" && !t.groups.allow(group) {
				return status.Errorf(codes.PermissionDenied, "databus: this token may not subscribe as consumer group %q: its line in the gateway's tokens file needs groups= to cover it", group)
			}
		}
	default:
		// A method added to the API without a rule here is refused
		// rather than open to every token.
		return status.Errorf(codes.PermissionDenied, "databus: %s has no permission rule for tokens (internal/gateway/auth.go)", method)
	}
	return nil
}
