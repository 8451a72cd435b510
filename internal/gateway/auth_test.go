package gateway_test

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/server"
	"github.com/highload-lab/hlab/internal/testcerts"
	"github.com/highload-lab/hlab/internal/testkit"
)

// publishOnce publishes one message to topic and returns the outcome.
func publishOnce(t *testing.T, c *databus.Client, topic string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pub, err := c.NewPublisher(ctx, topic)
	if err != nil {
		return err
	}
	defer pub.Close()
	return pub.Publish(ctx, msgs(0, 1)...)
}

// subscribeOnce opens a subscription and returns what its first Recv says.
func subscribeOnce(t *testing.T, c *databus.Client, topic, group string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sub, err := c.OpenSubscription(ctx, topic, group)
	if err != nil {
		return err
	}
	defer sub.Close()
	_, err = sub.Recv()
	return err
}

// certs are testcerts.Files (a CA, a server certificate for 127.0.0.1 and
// a client certificate) and a client certificate of another CA.
type certs struct {
	*testcerts.Files
	rogueCA *testcerts.CA
	rogue   *testcerts.Leaf
}

func newCerts(t *testing.T) *certs {
	t.Helper()
	c := &certs{Files: testcerts.NewFiles(t, t.TempDir()), rogueCA: testcerts.NewCA(t, "another CA")}
	c.rogue = c.rogueCA.Client(t, "mallory")
	return c
}

// TestMutualTLS: with --tls-client-ca the gateway serves only clients
// whose certificate its CA issued; the others fail the handshake.
func TestMutualTLS(t *testing.T) {
	cs := newCerts(t)
	auth, err := gateway.AuthFiles{TLSCert: cs.ServerCert, TLSKey: cs.ServerKey, TLSClientCA: cs.CAFile}.Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: auth})

	t.Run("good client certificate", func(t *testing.T) {
		if err := publishOnce(t, dial(t, addr, databus.WithTLSFiles(cs.ClientCert, cs.ClientKey, cs.CAFile)), "orders"); err != nil {
			t.Fatalf("a client with a certificate of the gateway's CA: %v", err)
		}
		// WithTLS with a tls.Config works the same.
		c := dial(t, addr, databus.WithTLS(&tls.Config{RootCAs: cs.CA.Pool(), Certificates: []tls.Certificate{cs.Client.TLS}}))
		if err := publishOnce(t, c, "orders"); err != nil {
			t.Fatalf("WithTLS: %v", err)
		}
	})

	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{"no client certificate", credentials.NewTLS(&tls.Config{RootCAs: cs.CA.Pool()})},
		{"client certificate of another CA", credentials.NewTLS(&tls.Config{RootCAs: cs.CA.Pool(), Certificates: []tls.Certificate{cs.rogue.TLS}})},
		{"client that does not trust the gateway", credentials.NewTLS(&tls.Config{RootCAs: cs.rogueCA.Pool(), Certificates: []tls.Certificate{cs.Client.TLS}})},
		{"plaintext client", insecure.NewCredentials()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(tc.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = openPublishStream(ctx, databusv1.NewDataBusClient(conn), gateway.MDTopic, "orders")
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("publish: %v, want the connection refused (Unavailable)", err)
			}
			t.Logf("refused: %v", err)
		})
	}
}

const tokensFile = `# the tokens of TestTokens
token-a   publish=orders subscribe=orders groups=billing
%s  publish=logs.*
`

// TestTokens: with --tokens every stream needs a known token, and a token
// reaches only the topics and groups its line lists.
func TestTokens(t *testing.T) {
	hashB := sha256.Sum256([]byte("token-b"))
	ts, err := gateway.ParseTokens(strings.NewReader(fmt.Sprintf(tokensFile, "sha256:"+hex.EncodeToString(hashB[:]))))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	addr := gatewaytest.Start(t, gateway.Config{Echo: true, Registry: reg}, gateway.ServerOptions{Auth: &gateway.Auth{Tokens: ts}})
	noToken := dial(t, addr)
	wrong := dial(t, addr, databus.WithToken("token-c"), databus.WithPlaintextToken())
	a := dial(t, addr, databus.WithToken("token-a"), databus.WithPlaintextToken())
	b := dial(t, addr, databus.WithToken("token-b"), databus.WithPlaintextToken())

	for _, tc := range []struct {
		name     string
		err      func() error
		want     codes.Code
		mentions string
	}{
		{"no token", func() error { return publishOnce(t, noToken, "orders") }, codes.Unauthenticated, "requires a token"},
		{"no token, subscribe", func() error { return subscribeOnce(t, noToken, "orders", "billing") }, codes.Unauthenticated, "requires a token"},
		{"unknown token", func() error { return publishOnce(t, wrong, "orders") }, codes.Unauthenticated, "unknown token"},
		{"publish to an allowed topic", func() error { return publishOnce(t, a, "orders") }, codes.OK, ""},
		{"publish to another topic", func() error { return publishOnce(t, a, "payments") }, codes.PermissionDenied, `"payments"`},
		{"subscribe to another topic", func() error { return subscribeOnce(t, a, "payments", "billing") }, codes.PermissionDenied, `"payments"`},
		{"subscribe as another group", func() error { return subscribeOnce(t, a, "orders", "analytics") }, codes.PermissionDenied, `"analytics"`},
		// Past the check, an echo gateway refuses subscriptions itself.
		{"subscribe allowed", func() error { return subscribeOnce(t, a, "orders", "billing") }, codes.FailedPrecondition, "echo"},
		{"hashed token, prefix pattern", func() error { return publishOnce(t, b, "logs.app") }, codes.OK, ""},
		{"hashed token, topic outside the prefix", func() error { return publishOnce(t, b, "orders") }, codes.PermissionDenied, `"orders"`},
		{"publish-only token subscribes", func() error { return subscribeOnce(t, b, "logs.app", "g") }, codes.PermissionDenied, `"logs.app"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err()
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
			if !strings.Contains(fmt.Sprint(err), tc.mentions) {
				t.Fatalf("error %q does not mention %s", err, tc.mentions)
			}
		})
	}
	// The metric counts refused streams. A Publisher whose stream is
	// refused before its first batch is on it opens a second stream for
	// that batch, so the client's cases give at least one refusal each;
	// the raw streams below give the exact count.
	refused := func(code codes.Code) float64 {
		return testkit.MetricSum(t, reg, "databus_auth_refused_total", map[string]string{"code": code.String()})
	}
	if n := refused(codes.Unauthenticated); n < 3 {
		t.Errorf("databus_auth_refused_total{code=Unauthenticated} = %v, want at least 3", n)
	}
	if n := refused(codes.PermissionDenied); n < 5 {
		t.Errorf("databus_auth_refused_total{code=PermissionDenied} = %v, want at least 5", n)
	}
	unauthenticated, denied := refused(codes.Unauthenticated), refused(codes.PermissionDenied)

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t.Run("health needs no token", func(t *testing.T) {
		if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	// Raw metadata, as a client other than ours could send it.
	for _, tc := range []struct {
		name string
		md   []string
		want codes.Code
	}{
		{"a second topic value is checked too", []string{"authorization", "Bearer token-a", gateway.MDTopic, "orders", gateway.MDTopic, "payments"}, codes.PermissionDenied},
		{"another scheme", []string{"authorization", "Basic token-a", gateway.MDTopic, "orders"}, codes.Unauthenticated},
		{"two authorization values", []string{"authorization", "Bearer token-c", "authorization", "Bearer token-a", gateway.MDTopic, "orders"}, codes.Unauthenticated},
		{"scheme in lower case", []string{"authorization", "bearer token-a", gateway.MDTopic, "orders"}, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openPublishStream(ctx, databusv1.NewDataBusClient(conn), tc.md...)
			if status.Code(err) != tc.want {
				t.Fatalf("got %v, want %s", err, tc.want)
			}
		})
	}
	// One stream each: 2 refused as Unauthenticated, 1 as PermissionDenied.
	if n := refused(codes.Unauthenticated) - unauthenticated; n != 2 {
		t.Errorf("raw streams: databus_auth_refused_total{code=Unauthenticated} rose by %v, want 2", n)
	}
	if n := refused(codes.PermissionDenied) - denied; n != 1 {
		t.Errorf("raw streams: databus_auth_refused_total{code=PermissionDenied} rose by %v, want 1", n)
	}
}

// TestSecuredRoundTrip: mutual TLS and tokens together, from files as the
// flags name them, carry messages end to end through Kafka.
func TestSecuredRoundTrip(t *testing.T) {
	k := depstest.Kafka(t, deps.KafkaFake)
	topic := newTopic(t, k, 2)
	cs := newCerts(t)
	tokens := testcerts.WriteFile(t, cs.Dir, "tokens", "producer publish="+topic+"\nconsumer subscribe="+topic+" groups=g1\n")
	testcerts.WriteFile(t, cs.Dir, "producer.token", "producer\n")
	testcerts.WriteFile(t, cs.Dir, "consumer.token", "consumer\n")

	fs := flag.NewFlagSet("databus", flag.ContinueOnError)
	var o gateway.Options
	o.RegisterFlags(fs)
	if err := fs.Parse([]string{"--tls-cert", cs.ServerCert, "--tls-key", cs.ServerKey, "--tls-client-ca", cs.CAFile, "--tokens", tokens}); err != nil {
		t.Fatal(err)
	}
	auth, err := o.Auth.Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Brokers: k.Brokers}, gateway.ServerOptions{Auth: auth})
	creds := func(who string) []databus.Option {
		return databus.Credentials{CAFile: cs.CAFile, CertFile: cs.ClientCert, KeyFile: cs.ClientKey, TokenFile: filepath.Join(cs.Dir, who+".token")}.Options()
	}
	producer, consumer := dial(t, addr, creds("producer")...), dial(t, addr, creds("consumer")...)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pub, err := producer.NewPublisher(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.Publish(ctx, msgs(0, 10)...); err != nil {
		t.Fatal(err)
	}
	if err := subscribeOnce(t, producer, topic, "g1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("the producer's token subscribes: %v, want PermissionDenied", err)
	}
	sub, err := consumer.OpenSubscription(ctx, topic, "g1")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	got := 0
	for got < 10 {
		b, err := sub.Recv()
		if err != nil {
			t.Fatalf("after %d messages: %v", got, err)
		}
		got += len(b.Messages)
		if err := sub.Ack(b.Messages...); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuthFilesLoad: flags that cannot work are refused at start, with
// what to fix.
func TestAuthFilesLoad(t *testing.T) {
	cs := newCerts(t)
	empty := testcerts.WriteFile(t, cs.Dir, "empty", "# nothing\n")
	for _, tc := range []struct {
		name  string
		files gateway.AuthFiles
		want  string // "" : loads
	}{
		{"nothing", gateway.AuthFiles{}, ""},
		{"TLS", gateway.AuthFiles{TLSCert: cs.ServerCert, TLSKey: cs.ServerKey}, ""},
		{"certificate without key", gateway.AuthFiles{TLSCert: cs.ServerCert}, "--tls-key"},
		{"client CA alone", gateway.AuthFiles{TLSClientCA: cs.CAFile}, "--tls-cert"},
		{"key of another certificate", gateway.AuthFiles{TLSCert: cs.ServerCert, TLSKey: cs.ClientKey}, "private key does not match"},
		{"client CA that is not PEM", gateway.AuthFiles{TLSCert: cs.ServerCert, TLSKey: cs.ServerKey, TLSClientCA: cs.ServerKey}, "no PEM certificate"},
		{"missing tokens file", gateway.AuthFiles{Tokens: filepath.Join(cs.Dir, "nope")}, "no such file"},
		{"tokens file without tokens", gateway.AuthFiles{Tokens: empty}, "no tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.files.Load()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestParseTokensErrors(t *testing.T) {
	for _, tc := range []struct{ file, want string }{
		{"tok", "may do nothing"},
		{"tok subscribe=a", "needs groups="},
		{"tok groups=a publish=b", "groups= without subscribe="},
		{"tok publish=a publish=b", "given twice"},
		{"tok read=a", "unknown permission"},
		{"tok publish", "key=value"},
		{"tok publish=a,,b", "empty name"},
		{"sha256:abc publish=a", "64 hex digits"},
		{"publish=a", "put the token first"},
		{"tok publish=a\n\n# again\ntok publish=b", "line 4: the same token as line 1"},
		// Quotas: each error names the line and the key, and what to write.
		{"tok publish=a publish-rate=5", "line 1: a quota needs name="},
		{"tok publish=a max-streams=5", "a quota needs name="},
		{"tok publish=a name=bad/name", `line 1: name="bad/name": a name is 1 to 64 letters, digits`},
		{"tok publish=a name=" + strings.Repeat("n", 65), "a name is 1 to 64"},
		{"tok publish=a name=n name=m", "name= given twice"},
		{"tok publish=a name=n publish-rate=0", "line 1: publish-rate=0: write a whole number from 1 to 10000000, in messages a second"},
		{"tok publish=a name=n publish-rate=1.5", "publish-rate=1.5: write a whole number"},
		{"tok publish=a name=n publish-rate=20000000", "publish-rate=20000000: write a whole number from 1 to 10000000"},
		{"tok publish=a name=n max-streams=-1", "max-streams=-1: write a whole number from 1 to 1000000, in streams"},
		{"tok publish=a name=n publish-bytes=1MB", "publish-bytes=1MB: write whole bytes a second, optionally in KiB, MiB or GiB (powers of 1024)"},
		{"tok publish=a name=n publish-bytes=1.5MiB", "publish-bytes=1.5MiB: write whole bytes"},
		{"tok publish=a name=n publish-bytes=10mib", "publish-bytes=10mib: write whole bytes"},
		{"tok publish=a name=n publish-bytes=2048GiB", "from 1 to 1024GiB"},
		{"tok subscribe=a groups=g name=n publish-rate=5", "publish-rate= and publish-bytes= limit publishing: give publish=TOPICS too"},
		{"name=n tok publish=a", "put the token first"},
		{"a publish=x name=n\nb publish=y name=n", "line 2: name=n is also line 1's name"},
		{"a publish=x\nb publish=y name=line-1", "line 2: name=line-1 is also line 1's name (a line without name= is called line-N)"},
	} {
		_, err := gateway.ParseTokens(strings.NewReader(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want %q", tc.file, err, tc.want)
		}
	}
}

// TestProcessSaysWhetherItAuthenticates: an unauthenticated gateway warns
// at start; a secured one says how it authenticates instead.
func TestProcessSaysWhetherItAuthenticates(t *testing.T) {
	cs := newCerts(t)
	tokens := testcerts.WriteFile(t, cs.Dir, "tokens", "tok publish=*\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
		not  string
	}{
		{"no flags", nil, "UNAUTHENTICATED", "databus gateway authentication"},
		{"TLS without client auth", []string{"--tls-cert", cs.ServerCert, "--tls-key", cs.ServerKey}, "authenticates no one", "UNAUTHENTICATED"},
		{"tokens over plaintext", []string{"--tokens", tokens}, "tokens can be read off the network", "UNAUTHENTICATED"},
		{"mutual TLS", []string{"--tls-cert", cs.ServerCert, "--tls-key", cs.ServerKey, "--tls-client-ca", cs.CAFile}, `"client_certificates":true`, `"level":"WARN"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("databus", flag.ContinueOnError)
			var o gateway.Options
			o.RegisterFlags(fs)
			if err := fs.Parse(append([]string{"--echo", "--grpc-addr", "127.0.0.1:0", "--drain-timeout", "1s"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			var log testkit.SyncBuffer
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			hs := server.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.NewJSONHandler(&log, nil))}
			go func() { done <- gateway.Serve(ctx, hs, o) }()
			testkit.EventuallyNil(t, 10*time.Second, "the gateway logs that it serves", func() error {
				if !strings.Contains(log.String(), "serving gRPC") {
					return fmt.Errorf("log so far: %s", log.String())
				}
				return nil
			})
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(log.String(), tc.want) || strings.Contains(log.String(), tc.not) {
				t.Fatalf("the log should say %q and not %q:\n%s", tc.want, tc.not, log.String())
			}
		})
	}
}
