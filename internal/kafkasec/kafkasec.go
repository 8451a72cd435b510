// Package kafkasec is how hlab's Kafka clients (the databus gateway, the
// checker, the lab) secure their connections to a Kafka cluster: TLS, with
// a CA, an optional client certificate (mutual TLS) and server name, and
// SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER. One Config,
// registered as flags once (RegisterFlags), turns into franz-go options
// (Opts) and is checked against the seed brokers at start (Check), so that
// a wrong password or an untrusted certificate stops the process with an
// error naming the broker and the mechanism instead of a gateway that
// serves and fails every stream.
//
// Secrets never come from the command line, which every local user reads
// (ps, /proc/PID/cmdline): the password and the OAUTHBEARER token come from
// files that other users cannot read (internal/secretfile), or from the
// environment ($HLAB_KAFKA_PASSWORD, $HLAB_KAFKA_TOKEN). The token file is
// read again on each authentication, that is for each new connection, so
// that a token a sidecar refreshes is used without a restart.
//
//	var sec kafkasec.Config
//	sec.RegisterFlags(fs) // --kafka-tls, --kafka-tls-ca, --kafka-sasl, --kafka-user, --kafka-password-file, ...
//	opts, err := sec.Opts()
//	if err == nil {
//		err = sec.Check(ctx, brokers, 10*time.Second)
//	}
//	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/highload-lab/hlab/internal/cliflag"
	"github.com/highload-lab/hlab/internal/secretfile"
)

// Mechanism is a SASL mechanism, as Kafka names it.
type Mechanism string

// The SASL mechanisms a Config may use.
const (
	NoSASL      Mechanism = ""
	Plain       Mechanism = "PLAIN"
	ScramSHA256 Mechanism = "SCRAM-SHA-256"
	ScramSHA512 Mechanism = "SCRAM-SHA-512"
	OAuthBearer Mechanism = "OAUTHBEARER"
)

// Mechanisms lists the SASL mechanisms Config.SASL takes.
var Mechanisms = []Mechanism{Plain, ScramSHA256, ScramSHA512, OAuthBearer}

// Environment variables a secret may come from when no file names it.
const (
	PasswordEnv = "HLAB_KAFKA_PASSWORD"
	TokenEnv    = "HLAB_KAFKA_TOKEN"
)

// Config is how a client secures its connections to Kafka. The zero value
// is plaintext without SASL. Every field is a name or a path, never a
// secret, so that cliflag.Args may pass a Config on to a child process.
type Config struct {
	// TLS encrypts every connection (Kafka's SSL and SASL_SSL listeners).
	// CAFile, CertFile and ServerName imply it.
	TLS bool
	// CAFile is a PEM bundle of the CAs that may issue the brokers'
	// certificates; "" = the system's roots.
	CAFile string
	// CertFile and KeyFile are the client's certificate (PEM, leaf first)
	// and its key, for brokers that require one (ssl.client.auth=required).
	// The key file must not be readable by other users.
	CertFile, KeyFile string
	// ServerName is the name the brokers' certificates must carry, when it
	// is not the host the client dials (brokers reached by IP, or through a
	// load balancer).
	ServerName string

	// SASL is the mechanism; "" = none.
	SASL Mechanism
	// User is the PLAIN or SCRAM user name.
	User string
	// PasswordFile holds the PLAIN or SCRAM password; "" = $HLAB_KAFKA_PASSWORD.
	PasswordFile string
	// TokenFile holds the OAUTHBEARER token, read again for each new
	// connection; "" = $HLAB_KAFKA_TOKEN (read once).
	TokenFile string
}

// RegisterFlags adds the --kafka-tls* and --kafka-sasl* flags to fs.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.TLS, "kafka-tls", false, "connect to Kafka over TLS (its SSL or SASL_SSL listener), trusting the system's CAs unless --kafka-tls-ca")
	fs.StringVar(&c.CAFile, "kafka-tls-ca", "", "PEM file of the CAs that issue the Kafka brokers' certificates (implies --kafka-tls)")
	fs.StringVar(&c.CertFile, "kafka-tls-cert", "", "client certificate (PEM) for brokers that require one (mutual TLS; implies --kafka-tls); needs --kafka-tls-key")
	fs.StringVar(&c.KeyFile, "kafka-tls-key", "", "the private key (PEM) of --kafka-tls-cert; refused if other users can read it (chmod 600)")
	fs.StringVar(&c.ServerName, "kafka-tls-server-name", "", "the name the brokers' certificates carry, when it is not the host dialed (brokers reached by IP or through a balancer)")
	fs.Var(cliflag.Text(&c.SASL), "kafka-sasl", "SASL mechanism towards Kafka: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER (default none). Without --kafka-tls, PLAIN sends the password in clear")
	fs.StringVar(&c.User, "kafka-user", "", "SASL user for PLAIN and SCRAM")
	fs.StringVar(&c.PasswordFile, "kafka-password-file", "", "file holding the PLAIN or SCRAM password, not readable by other users (default $"+PasswordEnv+"); there is no flag for the password itself, which ps would show")
	fs.StringVar(&c.TokenFile, "kafka-token-file", "", "file holding the OAUTHBEARER token, read again for each new connection, so a refreshed token is used without a restart (default $"+TokenEnv+", read once)")
}

// Enabled reports whether c asks for TLS or SASL.
func (c Config) Enabled() bool { return c != Config{} }

// normalized returns c with the mechanism in Kafka's spelling and TLS set
// when a TLS file or name asks for it.
func (c Config) normalized() Config {
	c.SASL = Mechanism(strings.ToUpper(strings.TrimSpace(string(c.SASL))))
	if c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" {
		c.TLS = true
	}
	return c
}

// Describe says how c connects, for logs and errors: "SCRAM-SHA-512 over
// TLS as user alice", "TLS with a client certificate", "plaintext".
func (c Config) Describe() string {
	c = c.normalized()
	var s string
	switch {
	case c.SASL == NoSASL && !c.TLS:
		return "plaintext, no SASL"
	case c.SASL == NoSASL:
		s = "TLS"
	case c.TLS:
		s = string(c.SASL) + " over TLS"
	default:
		s = string(c.SASL) + " over plaintext"
	}
	if c.CertFile != "" {
		s += " with a client certificate"
	}
	if c.User != "" && (c.SASL == Plain || c.SASL == ScramSHA256 || c.SASL == ScramSHA512) {
		s += " as user " + c.User
	}
	return s
}

// Warning says what is unsafe in c though it works, "" when nothing is:
// a PLAIN password sent without TLS.
func (c Config) Warning() string {
	if c = c.normalized(); c.SASL == Plain && !c.TLS {
		return "kafkasec: SASL PLAIN without --kafka-tls sends the password to Kafka in clear: anyone on the network path can read it"
	}
	return ""
}

// validate checks that c is complete and consistent, before any file is read.
func (c Config) validate() error {
	switch c.SASL {
	case NoSASL, OAuthBearer:
		if c.User != "" || c.PasswordFile != "" {
			return fmt.Errorf("kafkasec: --kafka-user and --kafka-password-file are for --kafka-sasl PLAIN or SCRAM-SHA-256/512, not %q", c.SASL)
		}
	case Plain, ScramSHA256, ScramSHA512:
		if c.User == "" {
			return fmt.Errorf("kafkasec: --kafka-sasl %s needs --kafka-user", c.SASL)
		}
		if c.TokenFile != "" {
			return fmt.Errorf("kafkasec: --kafka-token-file is for --kafka-sasl OAUTHBEARER, not %s", c.SASL)
		}
	default:
		return fmt.Errorf("kafkasec: unknown --kafka-sasl %q: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER", c.SASL)
	}
	if c.SASL != OAuthBearer && c.TokenFile != "" {
		return errors.New("kafkasec: --kafka-token-file needs --kafka-sasl OAUTHBEARER")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("kafkasec: --kafka-tls-cert and --kafka-tls-key go together: give both, or neither")
	}
	return nil
}

// Opts returns the franz-go options that make a client connect as c says
// (none for the zero Config). It reads the CA, the client certificate and
// the password now, and fails with what to fix when one is missing,
// unreadable or readable by other users; the OAUTHBEARER token file is
// read now to check it, and again for each connection.
func (c Config) Opts() ([]kgo.Opt, error) {
	c = c.normalized()
	if err := c.validate(); err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	if c.TLS {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL != NoSASL {
		m, err := c.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CAFile != "" {
		b, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: --kafka-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("kafkasec: --kafka-tls-ca %s holds no PEM certificate: give the CA certificate(s), -----BEGIN CERTIFICATE----- blocks", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" {
		key, err := secretfile.Read(c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: --kafka-tls-key: %w", err)
		}
		cert, err := os.ReadFile(c.CertFile)
		if err != nil {
			return nil, fmt.Errorf("kafkasec: --kafka-tls-cert: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, []byte(key))
		if err != nil {
			return nil, fmt.Errorf("kafkasec: --kafka-tls-cert %s and --kafka-tls-key %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func (c Config) mechanism() (sasl.Mechanism, error) {
	if c.SASL == OAuthBearer {
		token := c.tokenSource()
		if _, err := token(); err != nil { // fail at start, not on the first connection
			return nil, err
		}
		return oauthMechanism{oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			t, err := token()
			return oauth.Auth{Token: t}, err
		})}, nil
	}
	pass, err := c.password()
	if err != nil {
		return nil, err
	}
	switch c.SASL {
	case Plain:
		return plain.Auth{User: c.User, Pass: pass}.AsMechanism(), nil
	case ScramSHA256:
		return scram.Auth{User: c.User, Pass: pass}.AsSha256Mechanism(), nil
	default:
		return scram.Auth{User: c.User, Pass: pass}.AsSha512Mechanism(), nil
	}
}

func (c Config) password() (string, error) {
	if c.PasswordFile != "" {
		p, err := secretfile.Read(c.PasswordFile)
		if err == nil && p == "" {
			err = fmt.Errorf("%s is empty", c.PasswordFile)
		}
		if err != nil {
			return "", fmt.Errorf("kafkasec: --kafka-password-file: %w", err)
		}
		return p, nil
	}
	if p := os.Getenv(PasswordEnv); p != "" {
		return p, nil
	}
	return "", fmt.Errorf("kafkasec: --kafka-sasl %s needs a password: --kafka-password-file FILE (chmod 600) or $%s", c.SASL, PasswordEnv)
}

// tokenSource returns what reads the OAUTHBEARER token: the file, each
// time (a sidecar may replace it at any moment: a token that expires is
// refreshed there), or the environment, as it was at start.
func (c Config) tokenSource() func() (string, error) {
	if c.TokenFile != "" {
		path := c.TokenFile
		return func() (string, error) {
			t, err := secretfile.Read(path)
			if err == nil && t == "" {
				err = fmt.Errorf("%s is empty", path)
			}
			if err != nil {
				return "", fmt.Errorf("kafkasec: --kafka-token-file: %w", err)
			}
			return t, nil
		}
	}
	t := os.Getenv(TokenEnv)
	return func() (string, error) {
		if t == "" {
			return "", fmt.Errorf("kafkasec: --kafka-sasl OAUTHBEARER needs a token: --kafka-token-file FILE (chmod 600) or $%s", TokenEnv)
		}
		return t, nil
	}
}

// oauthMechanism is franz-go's OAUTHBEARER with the broker's answer to a
// refused token kept in the error (franz-go drops it), so that Check can
// say the token, not the network, is at fault.
type oauthMechanism struct{ sasl.Mechanism }

func (m oauthMechanism) Authenticate(ctx context.Context, host string) (sasl.Session, []byte, error) {
	s, first, err := m.Mechanism.Authenticate(ctx, host)
	return oauthSession{s}, first, err
}

type oauthSession struct{ sasl.Session }

func (s oauthSession) Challenge(resp []byte) (bool, []byte, error) {
	if len(resp) != 0 {
		return false, nil, fmt.Errorf("%w: it answered %.200s", errTokenRefused, resp)
	}
	return s.Session.Challenge(resp)
}
