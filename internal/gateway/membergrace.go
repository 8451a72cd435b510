package gateway

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// A group member outlives its last stream on this gateway for a grace
// (Config.MemberGrace), so that a client that reopens its stream takes
// the member's partitions back without a rebalance (detach, attach).

// startGraceLocked starts the member's grace, which closes it when
// grace ends (none when grace <= 0: the caller closes it), and returns
// the grace's generation. m.mu is held.
func (m *member) startGraceLocked(grace time.Duration) uint64 {
	m.endGraceLocked()
	gen := m.graceGen
	if grace > 0 {
		m.graceTimer = time.AfterFunc(grace, func() {
			if m.g.releaseMember(m, gen) {
				m.g.m.memberGraces.WithLabelValues("expired").Inc()
			}
		})
	}
	return gen
}

// endGraceLocked stops the member's grace, if one runs: a timer that
// fires anyway finds its generation gone. It reports whether one ran.
// m.mu is held.
func (m *member) endGraceLocked() bool {
	m.graceGen++
	if m.graceTimer == nil {
		return false
	}
	m.graceTimer.Stop()
	m.graceTimer = nil
	return true
}

// newMemberGraces registers databus_member_graces_total: graces that
// ended with a stream back (resumed: a rebalance pair saved) or with the
// member leaving (expired). Many expired beside few resumed say clients
// reconnect later than --member-grace, or are gone for good.
func newMemberGraces(reg prometheus.Registerer) counterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "databus_member_graces_total", Help: "Group members whose last subscribe stream here ended and that stayed in their group for --member-grace, by end: resumed (a stream of the group came back in time and took the partitions without a rebalance) or expired (the member left the group).",
	}, []string{"end"})
	reg.MustRegister(v)
	return promCounters{v}
}
