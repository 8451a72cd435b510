package gateway_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// testSandbox runs the real broker, shared by the package's tests.
var testSandbox *sandbox.Sandbox

func TestMain(m *testing.M) {
	sb, err := sandbox.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testSandbox = sb
	code := m.Run()
	for _, k := range kafkas {
		k.Stop()
	}
	sb.Close()
	os.Exit(code)
}

// kafkaKinds is kfake, plus the real broker unless HLAB_KAFKA=kfake
// (the real broker needs Java and its jars: make deps).
func kafkaKinds() []deps.KafkaKind {
	if os.Getenv("HLAB_KAFKA") == "kfake" {
		return []deps.KafkaKind{deps.KafkaFake}
	}
	return deps.KafkaKinds
}
