package databus_test

import (
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/testcerts"
)

// TestDialCredentials: options that cannot work fail at Dial, with what to
// fix, and a token is never sent in plaintext unless asked. (The gateway's
// tests, internal/gateway/auth_test.go, exercise these options against a
// secured gateway.)
func TestDialCredentials(t *testing.T) {
	dir := t.TempDir()
	files := testcerts.NewFiles(t, dir)
	caFile, cert, key := files.CAFile, files.ClientCert, files.ClientKey
	file := func(name, content string) string { return testcerts.WriteFile(t, dir, name, content) }
	token, empty, spaced := file("token", "s3cret\n"), file("empty", " \n"), file("spaced", "two words\n")

	for _, tc := range []struct {
		name string
		opts []databus.Option
		want string // "" : Dial succeeds
	}{
		{"plaintext", nil, ""},
		{"TLS files", []databus.Option{databus.WithTLSFiles(cert, key, caFile)}, ""},
		{"TLS with the system's roots", []databus.Option{databus.WithTLS(nil)}, ""},
		{"token over TLS", []databus.Option{databus.WithTLSFiles("", "", caFile), databus.WithToken("s3cret")}, ""},
		{"token over plaintext", []databus.Option{databus.WithToken("s3cret")}, "plaintext connection"},
		{"token file over plaintext", []databus.Option{databus.WithTokenFile(token)}, "plaintext connection"},
		{"token over plaintext, allowed", []databus.Option{databus.WithToken("s3cret"), databus.WithPlaintextToken()}, ""},
		// gRPC itself refuses when the plaintext comes from WithDialOptions.
		{"token over insecure dial options", []databus.Option{databus.WithToken("s3cret"), databus.WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()))}, "transport level security"},
		{"certificate without key", []databus.Option{databus.WithTLSFiles(cert, "", caFile)}, "both its certificate and its key"},
		{"missing CA file", []databus.Option{databus.WithTLSFiles("", "", filepath.Join(dir, "nope"))}, "no such file"},
		{"CA file without a certificate", []databus.Option{databus.WithTLSFiles("", "", key)}, "no PEM certificate"},
		{"missing token file", []databus.Option{databus.WithTLS(nil), databus.WithTokenFile(filepath.Join(dir, "nope"))}, "no such file"},
		{"empty token file", []databus.Option{databus.WithTLS(nil), databus.WithTokenFile(empty)}, "is empty"},
		{"token with a space", []databus.Option{databus.WithTLS(nil), databus.WithTokenFile(spaced)}, "has a space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := databus.Dial("127.0.0.1:1", tc.opts...)
			if err == nil {
				c.Close()
			}
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCredentialsFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	var c databus.Credentials
	c.RegisterFlags(fs, "databus-")
	if err := fs.Parse([]string{"--databus-tls-ca", "ca.crt", "--databus-tls-cert", "c.crt", "--databus-tls-key", "c.key", "--databus-token-file", "t", "--databus-plaintext-token"}); err != nil {
		t.Fatal(err)
	}
	want := databus.Credentials{CAFile: "ca.crt", CertFile: "c.crt", KeyFile: "c.key", TokenFile: "t", PlaintextToken: true}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	if n := len((databus.Credentials{}).Options()); n != 0 {
		t.Fatalf("the zero Credentials give %d options, want none", n)
	}
	// The files are read at Dial: a missing one is an error there.
	if _, err := databus.Dial("127.0.0.1:1", c.Options()...); err == nil || !strings.Contains(err.Error(), "c.crt") {
		t.Fatalf("Dial with missing files: %v", err)
	}
}
