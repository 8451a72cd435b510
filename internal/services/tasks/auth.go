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

// Bearer tokens are HMAC-signed, not stored: "t2.PAYLOAD.MAC" where
// PAYLOAD is the user id and expiry (16 bytes, base64url) and MAC the
// HMAC-SHA256, under the service's secret, of the token's audience (its
// deployment: Config.TokenAudience), its kind and PAYLOAD. Checking one
// costs a hash, no database round trip; the price is that a token stays
// valid until it expires (no server-side logout). Two deployments that
// share a secret, but not an audience, do not accept each other's
// tokens. Base64 is decoded strictly: one token has one spelling.
//
// A WebSocket ticket is the same with kind 'w' and "w2.": the user id,
// its own expiry (TicketTTL) and the bearer token's, good once for GET
// /v1/ws?ticket= on every instance of the deployment (its use is claimed
// in Postgres: Service.useTicket), so that a bearer token never travels
// in a URL, which proxies log.
const (
	tokenPrefix  = "t2."
	ticketPrefix = "w2."
	kindBearer   = 'b'
	kindTicket   = 'w'
)

// TicketTTL is how long a WebSocket ticket is good for.
const TicketTTL = 30 * time.Second

var strictB64 = base64.RawURLEncoding.Strict()

type tokenSigner struct {
	ttl  time.Duration
	macs sync.Pool // hash.Hash keyed with the secret
	bind []byte    // what every MAC covers first: the audience, length first
	now  func() time.Time
}

func newTokenSigner(secret []byte, ttl time.Duration, audience string) (*tokenSigner, error) {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		if _, err := rand.Read(secret); err != nil {
			return nil, err
		}
	}
	key := append([]byte(nil), secret...)
	bind := binary.BigEndian.AppendUint32(nil, uint32(len(audience)))
	t := &tokenSigner{ttl: ttl, now: time.Now, bind: append(bind, audience...)}
	t.macs.New = func() any { return hmac.New(sha256.New, key) }
	return t, nil
}

func (t *tokenSigner) mac(kind byte, payload []byte) []byte {
	h := t.macs.Get().(hash.Hash)
	h.Reset()
	h.Write(t.bind)
	h.Write([]byte{kind})
	h.Write(payload)
	sum := h.Sum(nil)
	t.macs.Put(h)
	return sum
}

// sign returns prefix, payload and its MAC as a token.
func (t *tokenSigner) sign(prefix string, kind byte, payload []byte) string {
	return prefix + strictB64.EncodeToString(payload) + "." + strictB64.EncodeToString(t.mac(kind, payload))
}

// open checks tok, a token of prefix and kind whose payload has
// len(payload) bytes, and fills payload; it returns the MAC too.
func (t *tokenSigner) open(tok, prefix string, kind byte, payload []byte) (mac []byte, ok bool) {
	rest, ok := strings.CutPrefix(tok, prefix)
	if !ok {
		return nil, false
	}
	p64, m64, ok := strings.Cut(rest, ".")
	var sum [sha256.Size]byte
	if !ok || strictB64.DecodedLen(len(p64)) != len(payload) || strictB64.DecodedLen(len(m64)) != len(sum) {
		return nil, false
	}
	if _, err := strictB64.Decode(payload, []byte(p64)); err != nil {
		return nil, false
	}
	if _, err := strictB64.Decode(sum[:], []byte(m64)); err != nil {
		return nil, false
	}
	if !hmac.Equal(sum[:], t.mac(kind, payload)) {
		return nil, false
	}
	return sum[:], true
}

// issue returns a token for uid and when it expires.
func (t *tokenSigner) issue(uid int64) (string, time.Time) {
	exp := t.now().Add(t.ttl).Truncate(time.Second)
	var payload [16]byte
	binary.BigEndian.PutUint64(payload[:8], uint64(uid))
	binary.BigEndian.PutUint64(payload[8:], uint64(exp.Unix()))
	return t.sign(tokenPrefix, kindBearer, payload[:]), exp
}

// verify returns the user id of a valid, unexpired token.
func (t *tokenSigner) verify(tok string) (int64, bool) {
	uid, _, ok := t.verifyUntil(tok)
	return uid, ok
}

// verifyUntil returns the user id of a valid, unexpired token and when it
// expires.
func (t *tokenSigner) verifyUntil(tok string) (uid int64, exp time.Time, ok bool) {
	var payload [16]byte
	if _, ok := t.open(tok, tokenPrefix, kindBearer, payload[:]); !ok {
		return 0, time.Time{}, false
	}
	uid = int64(binary.BigEndian.Uint64(payload[:8]))
	expUnix := int64(binary.BigEndian.Uint64(payload[8:]))
	if uid <= 0 || t.now().Unix() >= expUnix {
		return 0, time.Time{}, false
	}
	return uid, time.Unix(expUnix, 0), true
}

// ticket returns a WebSocket ticket for uid, whose bearer token expires
// at session, and when the ticket expires.
func (t *tokenSigner) ticket(uid int64, session time.Time) (string, time.Time) {
	exp := t.now().Add(TicketTTL).Truncate(time.Second)
	var payload [24]byte
	binary.BigEndian.PutUint64(payload[:8], uint64(uid))
	binary.BigEndian.PutUint64(payload[8:16], uint64(exp.Unix()))
	binary.BigEndian.PutUint64(payload[16:], uint64(session.Unix()))
	return t.sign(ticketPrefix, kindTicket, payload[:]), exp
}

// openTicket returns the user id and session expiry of a valid, unexpired
// ticket, when it expires, and its MAC: what Service.useTicket claims so
// that the ticket is good once.
func (t *tokenSigner) openTicket(tok string) (uid int64, session, exp time.Time, mac []byte, ok bool) {
	var payload [24]byte
	mac, ok = t.open(tok, ticketPrefix, kindTicket, payload[:])
	if !ok {
		return 0, time.Time{}, time.Time{}, nil, false
	}
	uid = int64(binary.BigEndian.Uint64(payload[:8]))
	exp = time.Unix(int64(binary.BigEndian.Uint64(payload[8:16])), 0)
	session = time.Unix(int64(binary.BigEndian.Uint64(payload[16:])), 0)
	now := t.now()
	if uid <= 0 || !now.Before(exp) || !now.Before(session) {
		return 0, time.Time{}, time.Time{}, nil, false
	}
	return uid, session, exp, mac, true
}

// useTicket returns the user id and session expiry of a valid, unexpired
// ticket that no instance of the deployment used before, and claims it.
// A ticket used on one instance is refused on the others: the claim is a
// row in Postgres (used_tickets), not a process's memory. An error is
// the database's.
func (s *Service) useTicket(ctx context.Context, tok string) (uid int64, session time.Time, ok bool, err error) {
	uid, session, exp, mac, ok := s.tokens.openTicket(tok)
	if !ok {
		return 0, time.Time{}, false, nil
	}
	if ok, err = s.store.claimTicket(ctx, mac, exp); err != nil || !ok {
		return 0, time.Time{}, false, err
	}
	return uid, session, true, nil
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
	b, err := bcrypt.GenerateFromPassword(bcryptInput(password), h.cost)
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
		bcrypt.CompareHashAndPassword(h.dummy, bcryptInput(password))
		return false, nil
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), bcryptInput(password)) == nil, nil
}

// bcryptInput is what bcrypt hashes for password. bcrypt takes at most 72
// bytes, and a password of up to maxPassword characters may be longer in
// UTF-8 (4 bytes a character at most): such a password is hashed as the
// base64 of its SHA-256 (44 bytes), so all of it counts. A password of at
// most 72 bytes is hashed as it is, as it always was: the accounts made
// before longer ones were accepted keep their hashes.
func bcryptInput(password string) []byte {
	if len(password) <= maxBcryptInput {
		return []byte(password)
	}
	sum := sha256.Sum256([]byte(password))
	return base64.StdEncoding.AppendEncode(nil, sum[:])
}

// Sign-up and login.

type credentials struct {
	Email    string          `json:"email"`
	Password string          `json:"password"`
	Name     nonNull[string] `json:"name"`
}

type session struct {
	User      User      `json:"user"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

const (
	minPassword    = 8  // characters
	maxPassword    = 72 // characters: see bcryptInput
	maxBcryptInput = 72 // bytes: bcrypt's limit
	maxEmail       = 254
	maxName        = 100
)

func normalizeEmail(field, s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", invalid(field, "required: the account's email address")
	}
	if len(s) > maxEmail {
		return "", invalid(field, "at most %d bytes", maxEmail)
	}
	if err := noNUL(field, s); err != nil {
		return "", err
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
	if n := utf8.RuneCountInString(c.Password); n < minPassword || n > maxPassword {
		return invalid("password", "must be %d to %d characters long", minPassword, maxPassword)
	}
	name := strings.TrimSpace(c.Name.or(""))
	if utf8.RuneCountInString(name) > maxName {
		return invalid("name", "at most %d characters", maxName)
	}
	if err := noNUL("name", name); err != nil {
		return err
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
	if c.Name.v != nil {
		return malformed("name", "login takes only email and password")
	}
	email, err := normalizeEmail("email", c.Email)
	if err != nil {
		return err
	}
	if c.Password == "" || utf8.RuneCountInString(c.Password) > maxPassword {
		return invalid("password", "required, at most %d characters", maxPassword)
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

// wsTicket answers POST /v1/ws/ticket: a ticket for GET /v1/ws?ticket=,
// good once, for TicketTTL, so that a browser (which cannot set headers on
// a WebSocket) never puts its bearer token in a URL.
func (s *Service) wsTicket(w http.ResponseWriter, r *http.Request, uid int64) error {
	_, session, ok := s.tokens.verifyUntil(bearer(r))
	if !ok {
		return ErrUnauthorized // authed checked it; it expired since
	}
	tk, exp := s.tokens.ticket(uid, session)
	return writeJSON(w, http.StatusCreated, wsTicket{Ticket: tk, ExpiresAt: exp})
}

type wsTicket struct {
	Ticket    string    `json:"ticket"`
	ExpiresAt time.Time `json:"expires_at"`
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
