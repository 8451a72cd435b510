package kafkasec_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/testcerts"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// TestCheck connects to the secured broker's listeners as a gateway
// would at start: the right credentials pass on each mechanism, and each
// wrong one is refused with an error that names the broker, the mechanism
// and what to check.
func TestCheck(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	dir := t.TempDir()
	wrongPassword := testcerts.WriteFile(t, dir, "wrong-password", "not-the-password\n")
	otherCA := testcerts.NewCA(t, "some other CA").WriteFile(t, dir, "other-ca.crt")
	expired := testcerts.WriteFile(t, dir, "expired-token", deps.UnsecuredToken(s.User, -time.Minute))
	scram := func(m kafkasec.Mechanism) kafkasec.Config {
		return kafkasec.Config{CAFile: s.CAFile, SASL: m, User: s.User, PasswordFile: s.PasswordFile}
	}
	tests := []struct {
		name string
		addr string
		c    kafkasec.Config
		want []string // in the error; nil: accepted
	}{
		{"PLAIN", s.SASLSSL, scram(kafkasec.Plain), nil},
		{"SCRAM-SHA-256", s.SASLSSL, scram(kafkasec.ScramSHA256), nil},
		{"SCRAM-SHA-512", s.SASLSSL, scram("scram-sha-512"), nil},
		{"OAUTHBEARER", s.SASLSSL, kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.OAuthBearer, TokenFile: s.TokenFile}, nil},
		{"SCRAM over plaintext", s.SASLPlaintext, kafkasec.Config{SASL: kafkasec.ScramSHA512, User: s.User, PasswordFile: s.PasswordFile}, nil},
		{"TLS", s.SSL, kafkasec.Config{CAFile: s.CAFile}, nil},
		{"mutual TLS", s.MutualTLS, kafkasec.Config{CAFile: s.CAFile, CertFile: s.ClientCert, KeyFile: s.ClientKey}, nil},

		{"wrong password", s.SASLSSL, kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.ScramSHA512, User: s.User, PasswordFile: wrongPassword},
			[]string{s.SASLSSL, "SCRAM-SHA-512 over TLS as user hlab", "wrong user or password", "--kafka-password-file"}},
		{"wrong PLAIN password", s.SASLPlaintext, kafkasec.Config{SASL: kafkasec.Plain, User: s.User, PasswordFile: wrongPassword},
			[]string{s.SASLPlaintext, "PLAIN over plaintext", "wrong user or password"}},
		{"expired token", s.SASLSSL, kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.OAuthBearer, TokenFile: expired},
			[]string{s.SASLSSL, "OAUTHBEARER over TLS", "token was refused"}},
		{"untrusted CA", s.SASLSSL, kafkasec.Config{CAFile: otherCA, SASL: kafkasec.ScramSHA256, User: s.User, PasswordFile: s.PasswordFile},
			[]string{s.SASLSSL, "SCRAM-SHA-256 over TLS", "not signed by a CA this client trusts", "--kafka-tls-ca"}},
		{"system roots", s.SSL, kafkasec.Config{TLS: true},
			[]string{s.SSL, "TLS", "--kafka-tls-ca"}},
		{"mechanism not enabled", s.SASLPlaintext, kafkasec.Config{SASL: kafkasec.OAuthBearer, TokenFile: s.TokenFile},
			[]string{s.SASLPlaintext, "OAUTHBEARER over plaintext", "does not enable OAUTHBEARER"}},
		{"no client certificate", s.MutualTLS, kafkasec.Config{CAFile: s.CAFile},
			[]string{s.MutualTLS, "requires a client certificate", "--kafka-tls-cert"}},
		{"SASL on a PLAINTEXT listener", k.Brokers[0], scram(kafkasec.ScramSHA256),
			[]string{k.Brokers[0], "SCRAM-SHA-256"}},
		{"plaintext on a TLS listener", s.SSL, kafkasec.Config{},
			[]string{s.SSL, "plaintext", "add --kafka-tls"}},
		{"TLS on a plaintext listener", k.Brokers[0], kafkasec.Config{CAFile: s.CAFile},
			[]string{k.Brokers[0], "does not speak TLS"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := tc.c.Check(context.Background(), []string{tc.addr}, 10*time.Second)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, kafkasec.ErrRefused) {
				t.Errorf("not ErrRefused (a refusal is final): %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			// Refused at once, not after the timeout: the first attempt's
			// error is the one that says why.
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refused after %s", d)
			}
		})
	}
}

// TestTokenFileReread replaces the OAUTHBEARER token file under a client
// and shows the next connection authenticates with the new token: an
// expired token written over the file makes a new connection fail, and a
// valid one written back makes the next succeed, all with one set of
// options.
func TestTokenFileReread(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	tokenFile := testcerts.WriteFile(t, t.TempDir(), "token", deps.UnsecuredToken(s.User, time.Hour))
	opts, err := kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.OAuthBearer, TokenFile: tokenFile}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	// Each ping is a new client, so a new connection and authentication.
	ping := func() error {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(s.SASLSSL), kgo.RequestRetries(0)}, opts...)...)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("valid token: %v", err)
	}
	testcerts.ReplaceFile(t, tokenFile, deps.UnsecuredToken(s.User, -time.Minute))
	if err := ping(); err == nil {
		t.Fatal("an expired token written over the file was not used: the connection was accepted")
	}
	testcerts.ReplaceFile(t, tokenFile, deps.UnsecuredToken(s.User, time.Hour))
	if err := ping(); err != nil {
		t.Fatalf("the fresh token written back was not used: %v", err)
	}
}

// TestOptsRefusesBadConfig checks what needs no broker: incomplete or
// inconsistent settings and exposed secret files are refused with what to
// do.
func TestOptsRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	pw := testcerts.WriteFile(t, dir, "password", "secret\n")
	open := filepath.Join(dir, "open-password")
	if err := os.WriteFile(open, []byte("secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(kafkasec.PasswordEnv, "")
	t.Setenv(kafkasec.TokenEnv, "")
	tests := []struct {
		name string
		c    kafkasec.Config
		want string
	}{
		{"unknown mechanism", kafkasec.Config{SASL: "GSSAPI"}, "unknown --kafka-sasl"},
		{"no user", kafkasec.Config{SASL: kafkasec.ScramSHA256, PasswordFile: pw}, "needs --kafka-user"},
		{"no password", kafkasec.Config{SASL: kafkasec.Plain, User: "u"}, "--kafka-password-file FILE"},
		{"password readable by others", kafkasec.Config{SASL: kafkasec.Plain, User: "u", PasswordFile: open}, "chmod 600"},
		{"no token", kafkasec.Config{SASL: kafkasec.OAuthBearer}, "--kafka-token-file FILE"},
		{"token file without OAUTHBEARER", kafkasec.Config{TokenFile: pw}, "needs --kafka-sasl OAUTHBEARER"},
		{"cert without key", kafkasec.Config{CertFile: pw}, "go together"},
		{"not a CA file", kafkasec.Config{CAFile: pw}, "holds no PEM certificate"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Opts()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
	t.Setenv(kafkasec.PasswordEnv, "from-env")
	if _, err := (kafkasec.Config{SASL: kafkasec.Plain, User: "u"}).Opts(); err != nil {
		t.Fatalf("password from $%s: %v", kafkasec.PasswordEnv, err)
	}
}

// TestCheckUnreachable: a broker that does not answer is ErrUnreachable,
// not a refusal, so that a gateway may start and wait for it.
func TestCheckUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pw := testcerts.WriteFile(t, t.TempDir(), "password", "secret\n")
	err = kafkasec.Config{TLS: true, SASL: kafkasec.ScramSHA256, User: "u", PasswordFile: pw}.Check(context.Background(), []string{addr}, 2*time.Second)
	if !errors.Is(err, kafkasec.ErrUnreachable) || errors.Is(err, kafkasec.ErrRefused) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("got %v, want ErrUnreachable naming %s", err, addr)
	}
}
