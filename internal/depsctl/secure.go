package depsctl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/highload-lab/hlab/internal/deps"
)

// SecureEnvFile is the file, in a kafka-secure state directory, that
// holds its secured listeners' addresses and the paths of the files a
// client needs, as shell variables (". STATE_DIR/secure.env"). Neither
// the password nor the token is in it: only where they are.
const SecureEnvFile = "secure.env"

// writeSecureEnv writes s to dir/SecureEnvFile.
func writeSecureEnv(dir string, s *deps.SecureKafka) error {
	vars := [][2]string{
		{"KAFKA_SASL_SSL", s.SASLSSL},
		{"KAFKA_SASL_PLAINTEXT", s.SASLPlaintext},
		{"KAFKA_SSL", s.SSL},
		{"KAFKA_MTLS", s.MutualTLS},
		{"KAFKA_CA", s.CAFile},
		{"KAFKA_CLIENT_CERT", s.ClientCert},
		{"KAFKA_CLIENT_KEY", s.ClientKey},
		{"KAFKA_USER", s.User},
		{"KAFKA_PASSWORD_FILE", s.PasswordFile},
		{"KAFKA_TOKEN_FILE", s.TokenFile},
	}
	var b strings.Builder
	b.WriteString("# Written by hlab deps up kafka-secure: the secured listeners (SASL_SSL: PLAIN, SCRAM-SHA-256/512,\n# OAUTHBEARER; SASL_PLAINTEXT: PLAIN, SCRAM; SSL; mutual TLS) and the files a client needs.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "%s='%s'\n", v[0], v[1])
	}
	if err := os.WriteFile(filepath.Join(dir, SecureEnvFile), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("depsctl: %w", err)
	}
	return nil
}
