package depsctl

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/highload-lab/hlab/internal/deps"
)

// TestSecureEnv: secure.env is a file only its owner reads, a shell can
// source it, and it names where the password and token are, never what
// they are.
func TestSecureEnv(t *testing.T) {
	dir := t.TempDir()
	s := &deps.SecureKafka{
		SASLSSL: "127.0.0.1:1001", SASLPlaintext: "127.0.0.1:1002", SSL: "127.0.0.1:1003", MutualTLS: "127.0.0.1:1004",
		CAFile: "/d/ca.crt", ClientCert: "/d/client.crt", ClientKey: "/d/client.key",
		User: "hlab", PasswordFile: "/d/password", TokenFile: "/d/token",
	}
	if err := writeSecureEnv(dir, s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, SecureEnvFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	out, err := exec.Command("sh", "-c", `. "$1" && echo "$KAFKA_SASL_SSL $KAFKA_MTLS $KAFKA_CA $KAFKA_USER $KAFKA_PASSWORD_FILE $KAFKA_TOKEN_FILE"`, "sh", path).CombinedOutput()
	if err != nil {
		t.Fatalf("sourcing it: %v: %s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "127.0.0.1:1001 127.0.0.1:1004 /d/ca.crt hlab /d/password /d/token"; got != want {
		t.Errorf("sourced: %q, want %q", got, want)
	}
}
