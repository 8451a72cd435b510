// Package testcerts makes throwaway certificate authorities and
// certificates for tests of TLS and mutual TLS: ECDSA P-256 keys,
// certificates valid from a minute ago for an hour, as tls.Certificates
// and, where a test needs paths (flags, files in a Secret), as PEM files.
//
//	ca := testcerts.NewCA(t, "test CA")
//	srv := ca.Server(t, "127.0.0.1")
//	cli := ca.Client(t, "alice")
//	serverTLS := &tls.Config{Certificates: []tls.Certificate{srv.TLS}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
//
// A test of flags that name files takes them all at once, with the token
// files that go beside them:
//
//	files := testcerts.NewFiles(t, dir) // dir/ca.crt, server.crt, server.key, client.crt, client.key
//	tokens := testcerts.WriteFile(t, dir, "tokens", "tok publish=orders\n")
//
// Outside tests (a local broker that hlab deps up secures for a day),
// GenerateCA, IssueServer and IssueClient do the same and return errors.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded (what a CA bundle file holds).
	PEM []byte
	key *ecdsa.PrivateKey
}

// Leaf is a certificate a CA issued, with its key.
type Leaf struct {
	TLS     tls.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named name, valid for an hour.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := GenerateCA(name, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// GenerateCA makes a self-signed CA named name, valid from a minute ago
// for validFor; the certificates it issues are valid as long.
func GenerateCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := template(name, validFor)
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Pool is a pool holding only ca.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Server issues a server certificate for hosts: IP addresses or DNS names.
func (ca *CA) Server(t testing.TB, hosts ...string) *Leaf {
	t.Helper()
	return must(t)(ca.IssueServer(hosts...))
}

// Client issues a client certificate whose common name is name.
func (ca *CA) Client(t testing.TB, name string) *Leaf {
	t.Helper()
	return must(t)(ca.IssueClient(name))
}

// IssueServer is Server outside a test.
func (ca *CA) IssueServer(hosts ...string) (*Leaf, error) {
	tmpl := template(hosts[0], ca.validFor())
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	return ca.issue(tmpl)
}

// IssueClient is Client outside a test.
func (ca *CA) IssueClient(name string) (*Leaf, error) {
	tmpl := template(name, ca.validFor())
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(tmpl)
}

// validFor is what remains of the CA's validity: its leaves end with it.
func (ca *CA) validFor() time.Duration { return time.Until(ca.Cert.NotAfter) }

func must(t testing.TB) func(*Leaf, error) *Leaf {
	return func(l *Leaf, err error) *Leaf {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}

func (ca *CA) issue(tmpl *x509.Certificate) (*Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	l := &Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		return nil, err
	}
	return l, nil
}

// WriteFile writes ca's PEM to dir/name and returns the path.
func (ca *CA) WriteFile(t testing.TB, dir, name string) string {
	t.Helper()
	return write(t, filepath.Join(dir, name), ca.PEM)
}

// WriteFiles writes l's certificate and key to dir/name.crt and
// dir/name.key and returns their paths.
func (l *Leaf) WriteFiles(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	return write(t, filepath.Join(dir, name+".crt"), l.CertPEM), write(t, filepath.Join(dir, name+".key"), l.KeyPEM)
}

// Files are a CA, a server certificate it issued for 127.0.0.1 and a
// client certificate it issued, with the paths of the PEM files they were
// written to.
type Files struct {
	CA             *CA
	Server, Client *Leaf
	// Dir holds the files: ca.crt, server.crt, server.key, client.crt
	// and client.key.
	Dir                   string
	CAFile                string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewFiles makes a CA, a server certificate for 127.0.0.1 and a client
// certificate, and writes them to dir.
func NewFiles(t testing.TB, dir string) *Files {
	t.Helper()
	ca := NewCA(t, "test CA")
	f := &Files{CA: ca, Server: ca.Server(t, "127.0.0.1"), Client: ca.Client(t, "client"), Dir: dir}
	f.CAFile = ca.WriteFile(t, dir, "ca.crt")
	f.ServerCert, f.ServerKey = f.Server.WriteFiles(t, dir, "server")
	f.ClientCert, f.ClientKey = f.Client.WriteFiles(t, dir, "client")
	return f
}

// WriteFile writes content to dir/name, readable by its owner only, and
// returns the path: for the secrets that go beside certificates (a token,
// a file of tokens).
func WriteFile(t testing.TB, dir, name, content string) string {
	t.Helper()
	return write(t, filepath.Join(dir, name), []byte(content))
}

// ReplaceFile writes content over path as a rotation does (a sidecar
// refreshing a token, a renewed certificate): a new file, readable by
// its owner only, renamed over the old one, so that a reader sees either.
func ReplaceFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := write(t, path+".new", []byte(content))
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func template(cn string, validFor time.Duration) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
	}
}
