package crudexp

import (
	"testing"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// The experiment signs every account in from one address, and opens a
// WebSocket per account and service: within the task API's default
// limits, so they never refuse the lab.
func TestLabFitsTheTaskAPILimits(t *testing.T) {
	accounts := vus / devicesPerUser
	if accounts > tasks.DefaultLoginIPBurst || tasks.DefaultMaxWebSocketsPerUser < 1 {
		t.Fatalf("%d accounts signing in from one address (limit %d at once), one WebSocket per account (limit %d): pass the services --login-ip-rate 0",
			accounts, tasks.DefaultLoginIPBurst, tasks.DefaultMaxWebSocketsPerUser)
	}
}
