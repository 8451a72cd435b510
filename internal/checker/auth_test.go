package checker_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/checker"
	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testcerts"
)

// securedGateway serves a gateway requiring a client certificate of its
// CA and a token from tokens; it returns the address and the files a
// client needs (CA, certificate, key) in dir.
func securedGateway(t *testing.T, cfg gateway.Config, dir, tokens string) (addr, caFile, cert, key string) {
	t.Helper()
	files := testcerts.NewFiles(t, dir)
	tokensFile := testcerts.WriteFile(t, dir, "tokens", tokens)
	auth, err := gateway.AuthFiles{TLSCert: files.ServerCert, TLSKey: files.ServerKey, TLSClientCA: files.CAFile, Tokens: tokensFile}.Load()
	if err != nil {
		t.Fatal(err)
	}
	return gatewaytest.Start(t, cfg, gateway.ServerOptions{Auth: auth}), files.CAFile, files.ClientCert, files.ClientKey
}

// TestMainSecuredGateway: the checker's TLS and token flags reach a
// gateway that requires both; without the token it is refused.
func TestMainSecuredGateway(t *testing.T) {
	dir := t.TempDir()
	addr, caFile, cert, key := securedGateway(t, gateway.Config{Echo: true}, dir, "checker-token publish=databus-checker\n")
	token := testcerts.WriteFile(t, dir, "token", "checker-token\n")
	base := []string{"--target", addr, "--scenario", "echo", "--streams", "2", "--warmup", "0", "--duration", "200ms", "--quiet",
		"--tls-ca", caFile, "--tls-cert", cert, "--tls-key", key}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"certificate and token", []string{"--token-file", token}, 0, ""},
		{"no token", nil, 1, "Unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := checker.Main(append(base, tc.args...), &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("exit %d, want %d with %q; stderr: %s", code, tc.code, tc.stderr, stderr.String())
			}
		})
	}
}

// TestSecuredDelivery: publishers and consumer-group members both dial
// with Config.Credentials.
func TestSecuredDelivery(t *testing.T) {
	k := kafkaFor(t, deps.KafkaFake)
	topic := newTopic(t, k)
	dir := t.TempDir()
	addr, caFile, cert, key := securedGateway(t, gateway.Config{Brokers: k.Brokers}, dir,
		"tok publish="+topic+" subscribe="+topic+" groups="+topic+"-checker-*\n")
	token := testcerts.WriteFile(t, dir, "token", "tok")
	res, err := checker.Run(context.Background(), checker.Config{
		Target: addr, Topic: topic, Scenario: checker.Latency, Streams: 2, Groups: 1,
		Warmup: -1, Duration: 300 * time.Millisecond,
		Credentials: databus.Credentials{CAFile: caFile, CertFile: cert, KeyFile: key, TokenFile: token},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || res.Delivery == nil || res.Delivery.Received == 0 {
		t.Fatalf("secured run: %+v (delivery %+v)", res, res.Delivery)
	}
}
