package app

import (
	"testing"
	"time"

	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/testcerts"
)

// TestDatabusToken: --databus-token-file reaches a gateway that requires
// a token; without it the gateway's refusal is the request's 503.
func TestDatabusToken(t *testing.T) {
	dir := t.TempDir()
	tokens := testcerts.WriteFile(t, dir, "tokens", "app-token publish=events\n")
	token := testcerts.WriteFile(t, dir, "token", "app-token\n")
	auth, err := gateway.AuthFiles{Tokens: tokens}.Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: auth})

	for _, tc := range []struct {
		name    string
		creds   databus.Credentials
		code    int
		failure string
	}{
		{"with the token", databus.Credentials{TokenFile: token, PlaintextToken: true}, 200, ""},
		{"without a token", databus.Credentials{}, 503, "rejected_unauthenticated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := startApp(t, Config{Mode: Databus, Databus: addr, Topic: "events", DatabusCredentials: tc.creds, Timeout: 5 * time.Second})
			got := get(a.URL + "/handle")
			if got.code != tc.code || got.failure != tc.failure {
				t.Fatalf("GET /handle: %+v, want %d and X-Failure %q", got, tc.code, tc.failure)
			}
		})
	}
}
