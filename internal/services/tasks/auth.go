package tasks

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"net/http"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"
)

// Bearer tokens are HMAC-signed, not stored: "t1.PAYLOAD.MAC" where
// PAYLOAD is the user id and expiry (16 bytes, base64url) and MAC their
// HMAC-SHA256 under the service's secret. Checking one costs a hash, no
// database round trip; the price is that a token stays valid until it
// expires (no server-side logout).
const tokenPrefix = "t1."

type tokenSigner struct {
	ttl  time.Duration
	macs sync.Pool // hash.Hash keyed with the secret
	now  func() time.Time
}

func newTokenSigner(secret []byte, ttl time.Duration) (*tokenSigner, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	key := append([]byte(nil), secret...)
	t := &tokenSigner{ttl: ttl, now: time.Now}
	t.macs.New = func() any { return hmac.New(sha256.New, key) }
	return t, nil
}

func (t *tokenSigner) mac(payload []byte) []byte {
	h := t.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(payload)
	sum := h.Sum(nil)
	t.macs.Put(h)
	return sum
}

// issue returns a token for uid and when it expires.
func (t *tokenSigner) issue(uid int64) (string, time.Time) {
	exp := t.now().Add(t.ttl).Truncate(time.Second)
	var payload [16]byte
	binary.BigEndian.PutUint64(payload[:8], uint64(uid))
	binary.BigEndian.PutUint64(payload[8:], uint64(exp.Unix()))
	enc := base64.RawURLEncoding
	return tokenPrefix + enc.EncodeToString(payload[:]) + "." + enc.EncodeToString(t.mac(payload[:])), exp
}

// verify returns the user id of a valid, unexpired token.
func (t *tokenSigner) verify(tok string) (int64, bool) {
	uid, _, ok := t.verifyUntil(tok)
	return uid, ok
}

// verifyUntil returns the user id of a valid, unexpired token and when it
// expires.
func (t *tokenSigner) verifyUntil(tok string) (uid int64, exp time.Time, ok bool) {
	rest, ok := strings.CutPrefix(tok, tokenPrefix)
	if !ok {
		return 0, time.Time{}, false
	}
	p64, m64, ok := strings.Cut(rest, ".")
	enc := base64.RawURLEncoding
	var payload [16]byte
	var mac [sha256.Size]byte
	if !ok || enc.DecodedLen(len(p64)) != len(payload) || enc.DecodedLen(len(m64)) != len(mac) {
		return 0, time.Time{}, false
	}
	if _, err := enc.Decode(payload[:], []byte(p64)); err != nil {
		return 0, time.Time{}, false
	}
	if _, err := enc.Decode(mac[:], []byte(m64)); err != nil {
		return 0, time.Time{}, false
	}
	if !hmac.Equal(mac[:], t.mac(payload[:])) {
		return 0, time.Time{}, false
	}
	uid = int64(binary.BigEndian.Uint64(payload[:8]))
	expUnix := int64(binary.BigEndian.Uint64(payload[8:]))
	if uid <= 0 || t.now().Unix() >= expUnix {
		return 0, time.Time{}, false
	}
	return uid, time.Unix(expUnix, 0), true
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// Passwords are hashed with bcrypt, a deliberately slow hash (~50 ms at
// cost 10). Hashes run at most GOMAXPROCS at a time: a burst of logins
// waits its turn instead of taking every CPU from the other requests.
// Sign-ups take at most half of those slots (one with a single core), so
// that a burst of them never leaves logins none.
type hasher struct {
	cost        int
	slots       chan struct{}
	signupSlots chan struct{}
	dummy       []byte // compared against for unknown emails, so they take as long
}

func newHasher(cost, slots int) (*hasher, error) {
	h := &hasher{cost: cost, slots: make(chan struct{}, max(1, slots)), signupSlots: make(chan struct{}, max(1, slots/2))}
	var err error
	h.dummy, err = bcrypt.GenerateFromPassword([]byte("no such user, same cost"), cost)
	return h, err
}

func (h *hasher) acquire(ctx context.Context) error {
	select {
	case h.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ErrBusy
	}
}

// hash hashes a new account's password, in a sign-up slot, then a slot.
func (h *hasher) hash(ctx context.Context, password string) (string, error) {
	select {
	case h.signupSlots <- struct{}{}:
	case <-ctx.Done():
		return "", ErrBusy
	}
	defer func() { <-h.signupSlots }()
	if err := h.acquire(ctx); err != nil {
		return "", err
	}
	defer func() { <-h.slots }()
	b, err := bcrypt.GenerateFromPassword([]byte(password), h.cost)
	return string(b), err
}

// check reports whether password matches hash ("" = unknown user: compare
// against a dummy so the answer takes as long).
func (h *hasher) check(ctx context.Context, hash, password string) (bool, error) {
	if err := h.acquire(ctx); err != nil {
		return false, err
	}
	defer func() { <-h.slots }()
	if hash == "" {
		bcrypt.CompareHashAndPassword(h.dummy, []byte(password))
		return false, nil
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil, nil
}

// Sign-up and login.

type credentials struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
}

type session struct {
	User      User      `json:"user"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

const (
	minPassword = 8
	maxPassword = 72 // bcrypt's limit, in bytes
	maxEmail    = 254
	maxName     = 100
)

func normalizeEmail(field, s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", invalid(field, "required: the account's email address")
	}
	if len(s) > maxEmail {
		return "", invalid(field, "at most %d bytes", maxEmail)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s {
		return "", invalid(field, "not an email address like name@example.com")
	}
	return s, nil
}

func (s *Service) signup(w http.ResponseWriter, r *http.Request) error {
	var c credentials
	if err := s.decode(w, r, &c); err != nil {
		return err
	}
	email, err := normalizeEmail("email", c.Email)
	if err != nil {
		return err
	}
	if n := len(c.Password); n < minPassword || n > maxPassword {
		return invalid("password", "must be %d to %d bytes long", minPassword, maxPassword)
	}
	name := strings.TrimSpace(c.Name)
	if utf8.RuneCountInString(name) > maxName {
		return invalid("name", "at most %d characters", maxName)
	}
	if err := s.allowSignup(r); err != nil {
		s.m.signupsLimited.Inc()
		return err
	}
	hash, err := s.hasher.hash(r.Context(), c.Password)
	if err != nil {
		return err
	}
	u, err := s.store.createUser(r.Context(), email, name, hash)
	if err != nil {
		return err
	}
	s.m.signups.Inc()
	tok, exp := s.tokens.issue(u.ID)
	return writeJSON(w, http.StatusCreated, session{User: u, Token: tok, ExpiresAt: exp})
}

func (s *Service) login(w http.ResponseWriter, r *http.Request) error {
	var c credentials
	if err := s.decode(w, r, &c); err != nil {
		return err
	}
	if c.Name != "" {
		return malformed("name", "login takes only email and password")
	}
	email, err := normalizeEmail("email", c.Email)
	if err != nil {
		return err
	}
	if c.Password == "" || len(c.Password) > maxPassword {
		return invalid("password", "required, at most %d bytes", maxPassword)
	}
	if err := s.allowLogin(r, email); err != nil {
		s.m.logins.WithLabelValues("limited").Inc()
		return err
	}
	u, hash, err := s.store.userForLogin(r.Context(), email)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	ok, err := s.hasher.check(r.Context(), hash, c.Password)
	if err != nil {
		return err
	}
	if !ok {
		s.m.logins.WithLabelValues("failed").Inc()
		return ErrBadCredentials
	}
	if err := s.store.noteLogin(r.Context(), u.ID); err != nil {
		return err
	}
	s.m.logins.WithLabelValues("ok").Inc()
	tok, exp := s.tokens.issue(u.ID)
	return writeJSON(w, http.StatusOK, session{User: u, Token: tok, ExpiresAt: exp})
}

func (s *Service) me(w http.ResponseWriter, r *http.Request, uid int64) error {
	u, err := s.store.user(r.Context(), uid)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}

// authedFunc is a handler of a signed-in user.
type authedFunc func(w http.ResponseWriter, r *http.Request, uid int64) error

// authed checks the bearer token and runs h for its user; with
// Deopt.UserTouch, inside the report's per-request transaction.
func (s *Service) authed(h authedFunc) apiFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		uid, ok := s.tokens.verify(bearer(r))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tasks"`)
			return ErrUnauthorized
		}
		if !s.cfg.Deopt.UserTouch {
			return h(w, r, uid)
		}
		return s.store.inRequestTx(r.Context(), uid, func(ctx context.Context) error {
			return h(w, r.WithContext(ctx), uid)
		})
	}
}
