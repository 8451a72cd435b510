package tasks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a webhook request's signature, when the service
// has a webhook secret: "t=UNIX,v1=HEX", HEX being the HMAC-SHA256, under
// the secret, of UNIX (the request's time, in seconds), a dot, and the
// body. The receiver checks it with VerifyWebhook (or the same few lines
// in its own language): the body came from a holder of the secret, and
// lately, so that a recorded request cannot be replayed much later.
const SignatureHeader = "Hlab-Signature"

// ErrBadSignature is returned by VerifyWebhook for a request the secret
// did not sign, or signed too long ago.
var ErrBadSignature = errors.New("tasks: the webhook request's signature does not hold")

// SignWebhook returns the SignatureHeader value of body, sent at t.
func SignWebhook(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(webhookMAC(secret, ts, body))
}

// VerifyWebhook checks header, a request's SignatureHeader, against body
// and secret, and that it was signed within tolerance of now.
func VerifyWebhook(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var ts, sig string
	for _, kv := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: no t=UNIX in %q", ErrBadSignature, header)
	}
	got, err := hex.DecodeString(sig)
	if err != nil || !hmac.Equal(got, webhookMAC(secret, ts, body)) {
		return fmt.Errorf("%w: v1 is not the body's HMAC under the secret", ErrBadSignature)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: signed %v from now, beyond %v", ErrBadSignature, d.Round(time.Second), tolerance)
	}
	return nil
}

func webhookMAC(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// webhookLabel is a webhook URL as logs and errors show it: scheme, host
// and path, without the user info and query, which may hold a token.
func webhookLabel(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
