package tasks_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestSignupLoginMe(t *testing.T) {
	e := newEnv(t, nil)
	anon := e.anon()
	alice := e.signup("alice@example.com")

	t.Run("duplicate email", func(t *testing.T) {
		a := anon.do("POST", "/v1/auth/signup", map[string]string{"email": "ALICE@example.com", "password": "another-password"})
		if a.code != http.StatusConflict || a.err.Error != "email_taken" || a.err.Reason == "" {
			t.Fatalf("second signup with the same email (other case) = %s, want 409 email_taken", a)
		}
	})

	t.Run("login", func(t *testing.T) {
		a := anon.do("POST", "/v1/auth/login", map[string]string{"email": "alice@example.com", "password": "password-of-alice@example.com"})
		if a.code != http.StatusOK {
			t.Fatalf("login = %s", a)
		}
		var s struct {
			Token string `json:"token"`
		}
		a.decode(t, &s)
		me := &client{e: e, token: s.Token}
		if a := me.do("GET", "/v1/me", nil); a.code != 200 || !strings.Contains(string(a.body), `"email":"alice@example.com"`) {
			t.Fatalf("me with the login's token = %s", a)
		}
		var lastLogin *string
		e.db.QueryRow(t.Context(), "SELECT last_login_at::text FROM users WHERE id = $1", alice.id).Scan(&lastLogin)
		if lastLogin == nil {
			t.Error("login did not record last_login_at")
		}
	})

	for _, tc := range []struct {
		name      string
		body      any
		code      int
		kind      string
		field     string
		signupToo bool // the same body is as wrong for signup
	}{
		{"wrong password", map[string]string{"email": "alice@example.com", "password": "wrong-password"}, 401, "bad_credentials", "", false},
		{"unknown email", map[string]string{"email": "nobody@example.com", "password": "whatever-pw"}, 401, "bad_credentials", "", false},
		{"not an email", map[string]string{"email": "alice", "password": "password-x"}, 422, "invalid_field", "email", true},
		{"display name in email", map[string]string{"email": "Alice <a@example.com>", "password": "password-x"}, 422, "invalid_field", "email", true},
		{"no password", map[string]string{"email": "x@example.com"}, 422, "invalid_field", "password", true},
		{"unknown field", map[string]any{"email": "x@example.com", "password": "password-x", "admin": true}, 400, "unknown_field", "admin", true},
		{"malformed", `{"email": "x@example.com",`, 400, "malformed_request", "", true},
		{"array", `[1,2]`, 400, "malformed_request", "", true},
		{"trailing data", `{"email": "x@example.com", "password": "password-x"} {}`, 400, "malformed_request", "", true},
		{"number for a string", `{"email": 5, "password": "password-x"}`, 400, "malformed_request", "email", true},
	} {
		t.Run("login "+tc.name, func(t *testing.T) {
			a := anon.do("POST", "/v1/auth/login", tc.body)
			if a.code != tc.code || a.err.Error != tc.kind || a.err.Field != tc.field || a.err.Reason == "" {
				t.Fatalf("login = %s, want %d %s on field %q with a reason", a, tc.code, tc.kind, tc.field)
			}
		})
		if tc.signupToo {
			t.Run("signup "+tc.name, func(t *testing.T) {
				before := e.count("users")
				a := anon.do("POST", "/v1/auth/signup", tc.body)
				if a.code != tc.code || a.err.Reason == "" {
					t.Fatalf("signup = %s, want %d with a reason", a, tc.code)
				}
				if n := e.count("users"); n != before {
					t.Fatalf("a refused signup wrote a user: %d -> %d", before, n)
				}
			})
		}
	}

	t.Run("signup limits", func(t *testing.T) {
		before := e.count("users")
		for _, body := range []map[string]string{
			{"email": "short@example.com", "password": "1234567"},
			{"email": "long@example.com", "password": strings.Repeat("p", 73)},
			{"email": "name@example.com", "password": "password-x", "name": strings.Repeat("n", 101)},
			{"email": strings.Repeat("e", 250) + "@example.com", "password": "password-x"},
		} {
			if a := anon.do("POST", "/v1/auth/signup", body); a.code != 422 || a.err.Field == "" {
				t.Errorf("signup %v = %s, want 422 naming the field", body, a)
			}
		}
		if n := e.count("users"); n != before {
			t.Fatalf("refused signups wrote users: %d -> %d", before, n)
		}
	})

	t.Run("content type", func(t *testing.T) {
		a := anon.do("POST", "/v1/auth/login", `{"email":"alice@example.com","password":"x"}`, "Content-Type", "text/plain")
		if a.code != http.StatusUnsupportedMediaType {
			t.Fatalf("login as text/plain = %s, want 415", a)
		}
	})

	t.Run("tokens", func(t *testing.T) {
		for name, tok := range map[string]string{
			"none":      "",
			"garbage":   "garbage",
			"tampered":  alice.token[:len(alice.token)-2] + "AA",
			"other key": "t1.AAAAAAAAAAEAAAAA_____w.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		} {
			c := &client{e: e, token: tok}
			a := c.do("GET", "/v1/me", nil)
			if a.code != http.StatusUnauthorized || a.err.Error != "unauthorized" {
				t.Errorf("token %s: /v1/me = %s, want 401", name, a)
			}
		}
	})

	t.Run("password is hashed", func(t *testing.T) {
		var hash string
		e.db.QueryRow(t.Context(), "SELECT password_hash FROM users WHERE id = $1", alice.id).Scan(&hash)
		if !strings.HasPrefix(hash, "$2a$") || strings.Contains(hash, "password-of") {
			t.Fatalf("stored password %q is not a bcrypt hash", hash)
		}
	})
}

// A token of one deployment is refused by another that shares its secret
// (staging and production, say): each binds tokens to its own database.
func TestTokenOtherDeployment(t *testing.T) {
	prod, staging := newEnv(t, nil), newEnv(t, nil) // same secret, two databases
	c := staging.signup("mallory@example.com")
	prod.signup("someone@example.com") // user ids line up: 1 in both
	if a := (&client{e: prod, token: c.token}).do("GET", "/v1/me", nil); a.code != http.StatusUnauthorized {
		t.Fatalf("a staging token on production: %s; want 401", a)
	}
}

// A token signed by one instance is good on another with the same secret.
func TestTokenSharedSecret(t *testing.T) {
	dsn := newDatabase(t)
	a := newEnvOn(t, dsn, nil)
	b := newEnvOn(t, dsn, nil)
	c := a.signup("bob@example.com")
	other := &client{e: b, token: c.token}
	if ans := other.do("GET", "/v1/me", nil); ans.code != 200 {
		t.Fatalf("token from instance A on instance B = %s", ans)
	}
}
