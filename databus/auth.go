package databus

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// WithTLS makes the connection TLS with c: c.RootCAs verify the gateway
// (nil: the system's roots) and c.Certificates hold the client
// certificate a gateway doing mutual TLS asks for. A nil c is TLS with
// the system's roots and no client certificate. The server name checked
// is the target's host unless c.ServerName says otherwise.
func WithTLS(c *tls.Config) Option {
	return func(o *cfg) {
		if c == nil {
			c = &tls.Config{}
		}
		o.creds = credentials.NewTLS(c)
	}
}

// WithTLSFiles is WithTLS from PEM files, read when Dial runs: certFile
// and keyFile are the client certificate and its key for mutual TLS
// (both or neither), caFile the CAs that verify the gateway (empty: the
// system's roots).
func WithTLSFiles(certFile, keyFile, caFile string) Option {
	return func(o *cfg) {
		c, err := clientTLS(certFile, keyFile, caFile)
		if err != nil {
			o.errs = append(o.errs, err)
			return
		}
		o.creds = credentials.NewTLS(c)
	}
}

func clientTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case certFile != "" && keyFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("databus: client certificate %s / key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case certFile != "" || keyFile != "":
		return nil, errors.New("databus: a client certificate needs both its certificate and its key file")
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("databus: CA file: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("databus: CA file %s holds no PEM certificate", caFile)
		}
	}
	return c, nil
}

// WithToken sends token as "authorization: Bearer <token>" on every
// stream, for a gateway started with --tokens. Dial refuses it on a
// plaintext connection, where anyone on the path could read it: add
// WithTLS or WithTLSFiles, or WithPlaintextToken where the path is
// trusted.
func WithToken(token string) Option {
	return func(o *cfg) { o.token, o.tokenFile = token, "" }
}

// WithTokenFile is WithToken with the token read from path when Dial
// runs, surrounding white space trimmed: a token in a file (a mounted
// Secret) stays out of command lines and process listings.
func WithTokenFile(path string) Option {
	return func(o *cfg) { o.token, o.tokenFile = "", path }
}

// WithPlaintextToken lets WithToken's token travel over a plaintext
// connection: for loopback, tests, or a network encrypted already (a
// service mesh's mutual TLS between pods).
func WithPlaintextToken() Option {
	return func(o *cfg) { o.plaintextToken = true }
}

// credentials are the dial options of c's transport credentials and
// token, or the first error of the options that set them.
func (c *cfg) credentials() ([]grpc.DialOption, error) {
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	creds := c.creds
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	token, err := c.bearerToken()
	if err != nil || token == "" {
		return opts, err
	}
	// WithDialOptions may hold credentials of another kind; then gRPC
	// itself refuses a plaintext connection (bearer requires security).
	if c.creds == nil && !c.plaintextToken && len(c.dialOpts) == 0 {
		return nil, errors.New("databus: WithToken on a plaintext connection: anyone on the path could read the token; add WithTLS or WithTLSFiles, or WithPlaintextToken for loopback and tests")
	}
	return append(opts, grpc.WithPerRPCCredentials(bearer{header: "Bearer " + token, requireTLS: !c.plaintextToken})), nil
}

// bearerToken returns the token to send, "" for none.
func (c *cfg) bearerToken() (string, error) {
	tok := c.token
	if c.tokenFile != "" {
		b, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return "", fmt.Errorf("databus: token file: %w", err)
		}
		if tok = strings.TrimSpace(string(b)); tok == "" {
			return "", fmt.Errorf("databus: token file %s is empty", c.tokenFile)
		}
	} else if c.token == "" {
		return "", nil
	}
	for _, r := range tok {
		if r <= ' ' || r > '~' {
			return "", errors.New("databus: the token has a space, a control or a non-ASCII character: give the token alone")
		}
	}
	return tok, nil
}

// bearer is per-RPC credentials carrying a token.
type bearer struct {
	header     string
	requireTLS bool
}

func (b bearer) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	if b.requireTLS {
		ri, _ := credentials.RequestInfoFromContext(ctx)
		if err := credentials.CheckSecurityLevel(ri.AuthInfo, credentials.PrivacyAndIntegrity); err != nil {
			return nil, fmt.Errorf("databus: not sending the token over this connection: %w", err)
		}
	}
	return map[string]string{"authorization": b.header}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.requireTLS }

// Credentials are what a command line passes Dial to reach a secured
// gateway (databus-checker, hlab serve app --mode databus): file paths,
// so secrets stay out of process listings. The zero value adds nothing:
// plaintext, no token.
type Credentials struct {
	// TLS makes the connection TLS; any of the files below implies it.
	TLS bool
	// CAFile verifies the gateway (empty: the system's roots).
	CAFile string
	// CertFile and KeyFile are the client certificate for mutual TLS.
	CertFile, KeyFile string
	// TokenFile holds the bearer token (WithTokenFile).
	TokenFile string
	// PlaintextToken allows the token without TLS (WithPlaintextToken).
	PlaintextToken bool
}

// RegisterFlags adds prefix+"tls", "tls-ca", "tls-cert", "tls-key",
// "token-file" and "plaintext-token" to fs.
func (c *Credentials) RegisterFlags(fs *flag.FlagSet, prefix string) {
	fs.BoolVar(&c.TLS, prefix+"tls", false, "connect to the gateway over TLS (implied by --"+prefix+"tls-ca and --"+prefix+"tls-cert)")
	fs.StringVar(&c.CAFile, prefix+"tls-ca", "", "CA bundle (PEM) that verifies the gateway's certificate (default: the system's roots)")
	fs.StringVar(&c.CertFile, prefix+"tls-cert", "", "client certificate (PEM) for a gateway that requires one (mutual TLS); needs --"+prefix+"tls-key")
	fs.StringVar(&c.KeyFile, prefix+"tls-key", "", "the private key (PEM) of --"+prefix+"tls-cert")
	fs.StringVar(&c.TokenFile, prefix+"token-file", "", "file holding the bearer token for a gateway started with --tokens")
	fs.BoolVar(&c.PlaintextToken, prefix+"plaintext-token", false, "send the token without TLS (loopback, tests, an encrypted network)")
}

// Options are the Dial options c stands for.
func (c Credentials) Options() []Option {
	var opts []Option
	if c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" {
		opts = append(opts, WithTLSFiles(c.CertFile, c.KeyFile, c.CAFile))
	}
	if c.TokenFile != "" {
		opts = append(opts, WithTokenFile(c.TokenFile))
	}
	if c.PlaintextToken {
		opts = append(opts, WithPlaintextToken())
	}
	return opts
}
