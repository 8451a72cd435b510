package deps

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/highload-lab/hlab/internal/testcerts"
)

// SecureKafka describes the secured listeners of a real broker started
// with KafkaConfig.Secure, and the files a client needs to use them. The
// broker keeps its PLAINTEXT listener (Kafka.Brokers) for the tools of
// this package and between its own broker and controller.
//
// The listeners follow Kafka's security documentation: TLS from PEM key
// stores (ssl.keystore.type=PEM) with certificates made for the broker;
// SCRAM users created when the storage is formatted (kafka-storage format
// --add-scram); PLAIN users in the listener's JAAS configuration;
// OAUTHBEARER checked by Kafka's unsecured validator, which takes unsigned
// tokens (UnsecuredToken): for tests, never for production.
type SecureKafka struct {
	// SASLSSL is the SASL_SSL listener: PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512 and OAUTHBEARER over TLS.
	SASLSSL string
	// SASLPlaintext is the SASL_PLAINTEXT listener: PLAIN, SCRAM-SHA-256
	// and SCRAM-SHA-512 without TLS (and no OAUTHBEARER: a listener that
	// refuses a mechanism, for tests of that error).
	SASLPlaintext string
	// SSL is a TLS listener without client certificates.
	SSL string
	// MutualTLS is a TLS listener that requires a client certificate
	// issued by the CA (ssl.client.auth=required).
	MutualTLS string

	// Dir holds the files below, readable by their owner only.
	Dir string
	// CAFile is the CA that issued the broker's certificate and ClientCert.
	CAFile string
	// ClientCert and ClientKey are a client certificate for MutualTLS.
	ClientCert, ClientKey string
	// User is the SASL user of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512,
	// whose password PasswordFile holds.
	User, PasswordFile string
	// TokenFile holds an OAUTHBEARER token for User that the broker takes
	// for as long as the certificates live (SecureKafkaValidity).
	TokenFile string
}

// SecureKafkaUser is the SASL user of a secured broker.
const SecureKafkaUser = "hlab"

// SecureKafkaValidity is how long a secured broker's certificates and
// token stay valid: past it, start a new broker (hlab deps down --purge,
// then up).
const SecureKafkaValidity = 30 * 24 * time.Hour

// kafkaSecure is what startReal adds to a broker for KafkaConfig.Secure.
type kafkaSecure struct {
	dir      string
	password string
	ca       []byte // PEM
	cert     []byte // the broker's, PEM
	key      []byte // the broker's, PEM
}

// secureListeners are the names of the secured listeners, in the order
// of their ports; MTLS is an SSL listener under a name of its own, so
// that its ssl.client.auth can differ.
var secureListeners = []string{"SASL_SSL", "SASL_PLAINTEXT", "SSL", "MTLS"}

// newKafkaSecure makes (or, for a kept broker, reads back) the CA, the
// broker's and a client's certificates, the user's password and a token
// in dir/secure.
func newKafkaSecure(dir string) (*kafkaSecure, error) {
	s := &kafkaSecure{dir: filepath.Join(dir, "secure")}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, fmt.Errorf("deps: secure kafka: %w", err)
	}
	if b, err := os.ReadFile(s.path("password")); err == nil { // a kept broker's: its SCRAM users hold this password
		s.password = strings.TrimSpace(string(b))
		s.ca, _ = os.ReadFile(s.path("ca.crt"))
		s.cert, _ = os.ReadFile(s.path("broker.crt"))
		s.key, _ = os.ReadFile(s.path("broker.key"))
		if len(s.ca) > 0 && len(s.cert) > 0 && len(s.key) > 0 {
			return s, nil
		}
	}
	ca, err := testcerts.GenerateCA("hlab kafka CA", SecureKafkaValidity)
	if err != nil {
		return nil, fmt.Errorf("deps: secure kafka: %w", err)
	}
	broker, err := ca.IssueServer("127.0.0.1", "localhost")
	if err != nil {
		return nil, fmt.Errorf("deps: secure kafka: %w", err)
	}
	client, err := ca.IssueClient(SecureKafkaUser)
	if err != nil {
		return nil, fmt.Errorf("deps: secure kafka: %w", err)
	}
	var pw [16]byte
	rand.Read(pw[:])
	s.password, s.ca, s.cert, s.key = hex.EncodeToString(pw[:]), ca.PEM, broker.CertPEM, broker.KeyPEM
	for name, b := range map[string][]byte{
		"ca.crt": ca.PEM, "broker.crt": broker.CertPEM, "broker.key": broker.KeyPEM,
		"client.crt": client.CertPEM, "client.key": client.KeyPEM,
		"password": []byte(s.password + "\n"),
		"token":    []byte(UnsecuredToken(SecureKafkaUser, SecureKafkaValidity) + "\n"),
	} {
		if err := os.WriteFile(s.path(name), b, 0o600); err != nil {
			return nil, fmt.Errorf("deps: secure kafka: %w", err)
		}
	}
	return s, nil
}

func (s *kafkaSecure) path(name string) string { return filepath.Join(s.dir, name) }

// ports is how many ports the secured listeners take beyond the broker's.
func (s *kafkaSecure) ports() int {
	if s == nil {
		return 0
	}
	return len(secureListeners)
}

// props returns what the secured listeners add to server.properties; ports
// are theirs, in secureListeners' order.
func (s *kafkaSecure) props(ports []int) kafkaSecureProps {
	if s == nil {
		return kafkaSecureProps{}
	}
	var p kafkaSecureProps
	for i, name := range secureListeners {
		p.Listeners += fmt.Sprintf(",%s://127.0.0.1:%d", name, ports[i])
		proto := name
		if name == "MTLS" {
			proto = "SSL"
		}
		p.Protocols += fmt.Sprintf(",%s:%s", name, proto)
	}
	// PEM key stores inline: Kafka takes an unencrypted key only there
	// (a PEM key store file needs ssl.key.password). A properties value
	// spans lines with \n.
	inline := func(pem []byte) string { return strings.ReplaceAll(strings.TrimSpace(string(pem)), "\n", `\n`) }
	plain := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, SecureKafkaUser, s.password)
	scram := `org.apache.kafka.common.security.scram.ScramLoginModule required;`
	lines := []string{
		"ssl.keystore.type=PEM",
		"ssl.keystore.certificate.chain=" + inline(s.cert),
		"ssl.keystore.key=" + inline(s.key),
		"ssl.truststore.type=PEM",
		"ssl.truststore.certificates=" + inline(s.ca),
		"ssl.client.auth=none",
		"listener.name.mtls.ssl.client.auth=required",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		// No sasl.server.callback.handler.class: Kafka's unsecured
		// validator checks OAUTHBEARER tokens (alg none, sub, exp).
		`listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="` + SecureKafkaUser + `";`,
	}
	for _, l := range []string{"sasl_ssl", "sasl_plaintext"} {
		lines = append(lines,
			"listener.name."+l+".plain.sasl.jaas.config="+plain,
			"listener.name."+l+".scram-sha-256.sasl.jaas.config="+scram,
			"listener.name."+l+".scram-sha-512.sasl.jaas.config="+scram)
	}
	p.Extra = strings.Join(lines, "\n")
	return p
}

// formatArgs are kafka-storage format's arguments that create the SCRAM
// users. The format tool runs for about a second on the broker's own
// machine; the broker and everything that connects to it read the
// password from files.
func (s *kafkaSecure) formatArgs() []string {
	if s == nil {
		return nil
	}
	var args []string
	for _, m := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", m, SecureKafkaUser, s.password))
	}
	return args
}

// describe returns the SecureKafka of the listeners on ports.
func (s *kafkaSecure) describe(ports []int) *SecureKafka {
	if s == nil {
		return nil
	}
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	return &SecureKafka{
		SASLSSL: addr(0), SASLPlaintext: addr(1), SSL: addr(2), MutualTLS: addr(3),
		Dir: s.dir, CAFile: s.path("ca.crt"),
		ClientCert: s.path("client.crt"), ClientKey: s.path("client.key"),
		User: SecureKafkaUser, PasswordFile: s.path("password"), TokenFile: s.path("token"),
	}
}

// kafkaSecureProps is what a secured broker adds to kafkaProps: listeners
// and their protocols after the PLAINTEXT and CONTROLLER ones, and the
// TLS and SASL settings.
type kafkaSecureProps struct {
	Listeners, Protocols, Extra string
}

// UnsecuredToken returns an unsigned OAUTHBEARER token (a JWS with alg
// "none") for sub, issued now and expiring after lifetime (a negative one
// makes an expired token): what Kafka's unsecured validator, and nothing
// meant for production, accepts.
func UnsecuredToken(sub string, lifetime time.Duration) string {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "none"})
	iat := now.Unix()
	if lifetime < 0 {
		iat = now.Add(2 * lifetime).Unix() // issued before it expired
	}
	claims, _ := json.Marshal(map[string]any{"sub": sub, "iat": iat, "exp": now.Add(lifetime).Unix()})
	enc := base64.RawURLEncoding.EncodeToString
	return enc(header) + "." + enc(claims) + "." // the signature is empty
}

// errSecureNeedsReal is returned by StartKafka for KafkaConfig.Secure on kfake.
var errSecureNeedsReal = errors.New("deps: a secured kafka is the real broker: kfake has no TLS or SASL listeners here; use Kind: real (hlab deps up kafka-secure)")
