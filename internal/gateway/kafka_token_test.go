package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/testcerts"
)

// TestSecuredKafkaTokenFileReplaced replaces the OAUTHBEARER token file
// under a running gateway, as a sidecar that refreshes tokens does: the
// next Kafka connection (a new group's client) authenticates with what
// the file holds then. An expired token written over it leaves a new
// group with nothing; a fresh one written back lets the next group read.
func TestSecuredKafkaTokenFileReplaced(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	dir := t.TempDir()
	tokenFile := testcerts.WriteFile(t, dir, "token", deps.UnsecuredToken(s.User, time.Hour))
	opts, err := kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.OAuthBearer, TokenFile: tokenFile}.Opts()
	if err != nil {
		t.Fatal(err)
	}
	topic := newTopic(t, k, 1)
	w := startGateway(t, gateway.Config{Brokers: []string{s.SASLSSL}, KafkaOpts: opts})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w.publishAll(t, ctx, topic, 1)

	testcerts.ReplaceFile(t, tokenFile, deps.UnsecuredToken(s.User, -time.Minute))
	if err := subscribeOnce(t, w.client(t), topic, depstest.Group(t)+"-expired"); err == nil {
		t.Fatal("a new group read with the expired token in the file: the gateway did not read it again")
	}
	testcerts.ReplaceFile(t, tokenFile, deps.UnsecuredToken(s.User, time.Hour))
	if err := subscribeOnce(t, w.client(t), topic, depstest.Group(t)+"-fresh"); err != nil {
		t.Fatalf("a new group with the fresh token back in the file: %v", err)
	}
}
