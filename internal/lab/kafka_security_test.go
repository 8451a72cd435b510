package lab_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/kafkasec"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/testcerts"
	"github.com/highload-lab/hlab/internal/testkit"
)

// onSecuredKafka is an experiment on external brokers that need SASL and
// TLS: it makes a topic with the lab's own client, starts a gateway
// process and publishes through it, and records the gateway's command
// line.
type onSecuredKafka struct {
	secured bool // Spec.SecuredKafka
	cmdline string
	flags   []string
}

func (e *onSecuredKafka) Spec(lab.Options) lab.Spec {
	return lab.Spec{Name: "sec", Title: "secured kafka", Needs: []string{lab.DepKafka}, SecuredKafka: e.secured}
}
func (*onSecuredKafka) Estimate(lab.Options) time.Duration { return time.Second }
func (e *onSecuredKafka) Run(ctx context.Context, run *lab.Run) error {
	k, err := run.StartKafka(ctx, 1)
	if err != nil {
		return err
	}
	topic := k.Topic("events")
	if err := k.CreateTopic(ctx, topic, 1); err != nil {
		return err
	}
	gw, err := run.StartGateway(ctx, 0, 0, gateway.Options{Config: gateway.Config{Brokers: k.Brokers}, Kafka: k.Security})
	if err != nil {
		return err
	}
	defer gw.Stop()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(gw.Proc.PID()) + "/cmdline")
	if err != nil {
		return err
	}
	e.cmdline = strings.ReplaceAll(string(b), "\x00", " ")
	c, err := databus.Dial(gw.GRPC)
	if err != nil {
		return err
	}
	defer c.Close()
	pub, err := c.NewPublisher(ctx, topic)
	if err != nil {
		return err
	}
	defer pub.Close()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return pub.Publish(pctx, databus.Message{Value: []byte("hi")})
}

// TestExternalSecuredKafka runs an experiment against external brokers
// over SCRAM-SHA-512 and TLS: the lab checks them first (refusing a wrong
// password with the broker named, security flags without brokers, and an
// experiment whose clients cannot take them), makes its topic through
// them, and the gateway it starts gets the password file's path on its
// command line, never the password, and publishes.
func TestExternalSecuredKafka(t *testing.T) {
	k := depstest.SecureKafka(t)
	s := k.Secure
	sec := kafkasec.Config{CAFile: s.CAFile, SASL: kafkasec.ScramSHA512, User: s.User, PasswordFile: s.PasswordFile}
	ext := lab.External{KafkaBrokers: []string{s.SASLSSL}, KafkaSecurity: sec}
	check := func(e *onSecuredKafka, x lab.External) error {
		return lab.CheckExternal(context.Background(), []lab.Experiment{e}, lab.Options{Mode: lab.Quick, External: x})
	}

	wrong := ext
	wrong.KafkaSecurity.PasswordFile = testcerts.WriteFile(t, t.TempDir(), "wrong", "wrong\n")
	if err := check(&onSecuredKafka{secured: true}, wrong); !errors.Is(err, kafkasec.ErrRefused) || !strings.Contains(err.Error(), s.SASLSSL) {
		t.Errorf("a wrong password: %v; want a refusal naming %s", err, s.SASLSSL)
	}
	if err := check(&onSecuredKafka{secured: true}, lab.External{KafkaSecurity: sec}); err == nil || !strings.Contains(err.Error(), "give the brokers too") {
		t.Errorf("security without brokers: %v", err)
	}
	if err := check(&onSecuredKafka{}, ext); err == nil || !strings.Contains(err.Error(), "plaintext only") {
		t.Errorf("an experiment that cannot take them: %v", err)
	}
	exp := &onSecuredKafka{secured: true}
	if err := check(exp, ext); err != nil {
		t.Fatal(err)
	}
	bin := testkit.HlabBinary(t)
	var progress strings.Builder
	results, err := lab.RunAll(context.Background(), []lab.Experiment{exp}, lab.Options{Mode: lab.Quick, WorkDir: t.TempDir(), External: ext, Self: bin}, depstest.Sandbox(t), lab.NewProgress(&progress, false))
	if err != nil {
		t.Fatal(err)
	}
	if res := results[0]; res.Error != "" {
		t.Fatalf("experiment failed: %s\n%s", res.Error, progress.String())
	}
	password, err := os.ReadFile(s.PasswordFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(exp.cmdline, strings.TrimSpace(string(password))) {
		t.Fatalf("the password is on the gateway's command line: %s", exp.cmdline)
	}
	for _, f := range []string{"--kafka-password-file=" + s.PasswordFile, "--kafka-sasl=SCRAM-SHA-512", "--kafka-tls-ca=" + s.CAFile} {
		if !strings.Contains(exp.cmdline, f) {
			t.Errorf("the gateway's command line lacks %s: %s", f, exp.cmdline)
		}
	}
}
