package kafkasec

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Check connects to each of brokers as c says, at once, each within
// timeout, and returns nil when all of them accepted. Otherwise its error
// names each broker that failed, how the client connected (the mechanism,
// TLS or not) and what to check; it wraps ErrRefused when one refused,
// else ErrUnreachable.
func (c Config) Check(ctx context.Context, brokers []string, timeout time.Duration) error {
	opts, err := c.Opts()
	if err != nil {
		return err
	}
	errs := make([]error, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.checkOne(ctx, b, opts, timeout)
		}()
	}
	wg.Wait()
	var refused []error
	for _, e := range errs {
		if errors.Is(e, ErrRefused) {
			refused = append(refused, e)
		}
	}
	if len(refused) > 0 {
		return errors.Join(refused...)
	}
	return errors.Join(errs...)
}

func (c Config) checkOne(ctx context.Context, broker string, opts []kgo.Opt, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One try per connection: a refusal is final, and the error of the
	// first attempt is the one that says why.
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(broker),
		kgo.DialTimeout(timeout),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(timeout),
	}, opts...)...)
	if err != nil {
		return fmt.Errorf("kafkasec: broker %s: %w", broker, err)
	}
	defer cl.Close()
	// Any request opens a connection and authenticates it first.
	_, err = cl.Request(ctx, kmsg.NewPtrApiVersionsRequest())
	if err == nil {
		return nil
	}
	return c.explain(broker, err, timeout)
}

// explain turns a failed connection into an error naming the broker and
// the mechanism, and saying what to check.
func (c Config) explain(broker string, err error, timeout time.Duration) error {
	c = c.normalized()
	how := c.Describe()
	refused := func(what string) error {
		return fmt.Errorf("%w: broker %s, %s: %v: %s", ErrRefused, broker, how, err, what)
	}
	var (
		unknownCA *x509.UnknownAuthorityError
		unknownV  x509.UnknownAuthorityError
		verify    *tls.CertificateVerificationError
		host      x509.HostnameError
		invalid   x509.CertificateInvalidError
		header    tls.RecordHeaderError
		firstRead *kgo.ErrFirstReadEOF
	)
	unreachable := fmt.Errorf("%w: broker %s, %s: %v (is it up, within %s, and is this the port of its listener for %s? A plaintext client waits until the timeout on a TLS port)", ErrUnreachable, broker, how, err, timeout, how)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), isTimeout(err):
		return unreachable
	case errors.Is(err, kerr.SaslAuthenticationFailed), errors.Is(err, errTokenRefused):
		if c.SASL == OAuthBearer {
			return refused("the token was refused: check that it is valid, not expired, and meant for this cluster (--kafka-token-file, or $" + TokenEnv + ")")
		}
		return refused("wrong user or password: check --kafka-user and the password in --kafka-password-file (or $" + PasswordEnv + "); a SCRAM user must exist for this very mechanism (kafka-configs --alter --add-config '" + string(c.SASL) + "=[password=...]' --entity-type users --entity-name " + c.User + ")")
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return refused("this listener does not enable " + string(c.SASL) + ": pick one of its sasl.enabled.mechanisms with --kafka-sasl, or check that this port is the listener meant for it")
	case errors.Is(err, kerr.IllegalSaslState):
		return refused("this listener takes no SASL (a PLAINTEXT or SSL listener): use the broker's SASL_SSL or SASL_PLAINTEXT port, or drop --kafka-sasl")
	case errors.As(err, &host):
		return refused("the broker's certificate does not carry the name dialed: set --kafka-tls-server-name to a name it carries, or dial the broker by that name")
	case errors.As(err, &unknownCA), errors.As(err, &unknownV):
		return refused("the broker's certificate is not signed by a CA this client trusts: give the CA that issued it with --kafka-tls-ca")
	case errors.As(err, &invalid), errors.As(err, &verify):
		return refused("the broker's certificate did not verify (expired, or not for a server?): check it, and --kafka-tls-ca")
	case errors.As(err, &header), c.TLS && errors.As(err, &firstRead):
		return refused("this port does not speak TLS (a PLAINTEXT or SASL_PLAINTEXT listener): drop --kafka-tls, or use the broker's SSL or SASL_SSL port")
	case strings.Contains(err.Error(), "remote error: tls:"): // crypto/tls's alert from the peer has no exported type
		if c.CertFile == "" {
			return refused("the broker ended the TLS handshake: it requires a client certificate (ssl.client.auth=required): give --kafka-tls-cert and --kafka-tls-key, issued by a CA it trusts")
		}
		return refused("the broker ended the TLS handshake: check that it trusts the CA that issued --kafka-tls-cert")
	case !c.TLS && strings.Contains(err.Error(), "tls endpoint"): // franz-go's guess from a TLS alert read as a response size
		return refused("this port speaks TLS (an SSL or SASL_SSL listener): add --kafka-tls and --kafka-tls-ca")
	case errors.As(err, &firstRead), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), isReset(err):
		if c.SASL != NoSASL {
			return refused("the broker closed the connection during the handshake: check that this port is a SASL listener (SASL_SSL or SASL_PLAINTEXT) and that --kafka-tls matches it")
		}
		return refused("the broker closed the connection during the handshake: check that this port's listener needs no SASL (PLAINTEXT or SSL) and that --kafka-tls matches it; with SASL, add --kafka-sasl")
	}
	return unreachable
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isReset reports whether the broker ended the connection while it was
// read: reset or closed, not timed out (isTimeout comes first).
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read"
}
