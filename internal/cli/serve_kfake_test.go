package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/highload-lab/hlab/internal/testkit"
)

// TestServeKfake: "hlab serve kfake" speaks Kafka on --kafka-addr with the
// --topics created, answers /healthz, and stops cleanly on SIGTERM.
func TestServeKfake(t *testing.T) {
	bin := testkit.HlabBinary(t)
	kafka := testkit.FreeAddr(t)
	httpAddr := testkit.FreeAddr(t)
	cmd := exec.Command(bin, "serve", "kfake", "--addr", httpAddr, "--kafka-addr", kafka, "--topics", "orders,audit", "--partitions", "3")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	testkit.Healthy(t, 10*time.Second, "http://"+httpAddr+"/healthz")
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafka), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("hello")}).FirstErr(); err != nil {
		t.Fatalf("produce to a --topics topic: %v", err)
	}
	fetches := cl.PollFetches(ctx)
	if errs := fetches.Errors(); len(errs) > 0 || fetches.NumRecords() != 1 || string(fetches.Records()[0].Value) != "hello" {
		t.Fatalf("consumed %d records, errors %v", fetches.NumRecords(), errs)
	}
	cl.Close()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := testkit.WaitExit(t, cmd, 15*time.Second, "kfake, after SIGTERM,"); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestServeKfakeBadAddr(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Main([]string{"serve", "kfake", "--kafka-addr", "10.1.2.3:9092", "--addr", "127.0.0.1:0"}, &State{Stdout: &stdout, Stderr: &stderr, Getenv: os.Getenv})
	if code == 0 {
		t.Fatal("kfake started on a non-loopback address")
	}
}
