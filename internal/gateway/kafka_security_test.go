package gateway_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/testcerts"
	"github.com/highload-lab/hlab/internal/testkit"
)

// TestSecuredKafkaRoundTrip publishes and consumes through a gateway on
// each way of securing its Kafka connections, against the shared secured
// broker: SASL PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER over
// TLS, TLS alone, and mutual TLS.
func TestSecuredKafkaRoundTrip(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	sasl := func(m kafkasec.Mechanism) kafkasec.Config {
		return kafkasec.Config{CAFile: s.CAFile, SASL: m, User: s.User, PasswordFile: s.PasswordFile}
	}
	for _, tc := range []struct {
		name string
		addr string
		sec  kafkasec.Config
	}{
		{"PLAIN", s.SASLSSL, sasl(kafkasec.Plain)},
		{"SCRAM-SHA-256", s.SASLSSL, sasl(kafkasec.ScramSHA256)},
		{"SCRAM-SHA-512", s.SASLSSL, sasl(kafkasec.ScramSHA512)},
		{"OAUTHBEARER", s.SASLSSL, kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.OAuthBearer, TokenFile: s.TokenFile}},
		{"TLS", s.SSL, kafkasec.Config{CAFile: s.CAFile}},
		{"mutual TLS", s.MutualTLS, kafkasec.Config{CAFile: s.CAFile, CertFile: s.ClientCert, KeyFile: s.ClientKey}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts, err := tc.sec.Opts()
			if err != nil {
				t.Fatal(err)
			}
			topic := newTopic(t, k, 2) // through the PLAINTEXT listener, as an admin would
			w := startGateway(t, gateway.Config{Brokers: []string{tc.addr}, KafkaOpts: opts})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w.publishAll(t, ctx, topic, 20)
			got := w.subscribeKeys(t, ctx, topic, depstest.Group(t))
			got.await(t, 30*time.Second, "the subscriber receives what was published", 20, nil)
		})
	}
}

// TestSecuredKafkaRefusedAtStart starts the gateway process with a wrong
// password, a CA that did not issue the broker's certificate and a
// mechanism the listener does not enable: each exits at start with an
// error naming the broker, the mechanism and what to check.
func TestSecuredKafkaRefusedAtStart(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	k := depstest.SecureKafka(t)
	s := k.Secure
	dir := t.TempDir()
	wrong := testcerts.WriteFile(t, dir, "wrong-password", "not-the-password\n")
	otherCA := testcerts.NewCA(t, "some other CA").WriteFile(t, dir, "other-ca.crt")
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"wrong password", []string{"--brokers", s.SASLSSL, "--kafka-tls-ca", s.CAFile, "--kafka-sasl", "SCRAM-SHA-512", "--kafka-user", s.User, "--kafka-password-file", wrong},
			[]string{s.SASLSSL, "SCRAM-SHA-512 over TLS as user " + s.User, "wrong user or password"}},
		{"untrusted CA", []string{"--brokers", s.SASLSSL, "--kafka-tls-ca", otherCA, "--kafka-sasl", "SCRAM-SHA-256", "--kafka-user", s.User, "--kafka-password-file", s.PasswordFile},
			[]string{s.SASLSSL, "SCRAM-SHA-256 over TLS", "not signed by a CA this client trusts"}},
		{"mechanism not enabled", []string{"--brokers", s.SASLPlaintext, "--kafka-sasl", "OAUTHBEARER", "--kafka-token-file", s.TokenFile},
			[]string{s.SASLPlaintext, "OAUTHBEARER over plaintext", "does not enable OAUTHBEARER"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--grpc-addr", testkit.FreeAddr(t), "--http-addr", testkit.FreeAddr(t)}, tc.args...)
			start := time.Now()
			_, stderr, err := testkit.Run(bin, args...)
			if err == nil {
				t.Fatalf("the gateway started and exited 0: %s", stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("refused after %s: a refusal needs no timeout", d)
			}
		})
	}
}

// TestSecuredKafkaNoSecretInArgv runs the gateway process with SCRAM over
// TLS, its password in a file, and publishes through it: the password
// appears nowhere on its command line (/proc/PID/cmdline, what ps shows
// every local user).
func TestSecuredKafkaNoSecretInArgv(t *testing.T) {
	bin := testkit.Binary(t, "./cmd/databus")
	k := depstest.SecureKafka(t)
	s := k.Secure
	password, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	topic := newTopic(t, k, 1)
	g := startGatewayProcess(t, bin, "--brokers", s.SASLSSL, "--kafka-tls-ca", s.CAFile,
		"--kafka-sasl", "SCRAM-SHA-512", "--kafka-user", s.User, "--kafka-password-file", s.PasswordFile)
	w := &gw{addr: g.addr}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.publishAll(t, ctx, topic, 5)
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(g.cmd.Process.Pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if pw := strings.TrimSpace(string(password)); pw == "" || strings.Contains(string(cmdline), pw) {
		t.Fatalf("the password is on the gateway's command line: %q", cmdline)
	}
	if !strings.Contains(string(cmdline), "--kafka-password-file") {
		t.Fatalf("not the process expected: %q", cmdline)
	}
}
