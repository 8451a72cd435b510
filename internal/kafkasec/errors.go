package kafkasec

import "errors"

var (
	// ErrUnreachable is wrapped by Check's error when a broker did not
	// answer at all (down, a wrong port, or a plaintext client talking to
	// a TLS port): unlike a refused credential, that may pass, so a
	// caller may decide to start anyway.
	ErrUnreachable = errors.New("kafkasec: broker unreachable")

	// ErrRefused is wrapped by Check's error when a broker answered and
	// refused the connection: a wrong password or token, an untrusted
	// certificate, a mechanism it does not enable, a missing client
	// certificate. Retrying does not help; the configuration must change.
	ErrRefused = errors.New("kafkasec: broker refused the connection")
)

// errTokenRefused is what an OAUTHBEARER authentication fails with when
// the broker answers the token with an error (RFC 7628 section 3.2.2).
var errTokenRefused = errors.New("the broker refused the OAUTHBEARER token")
