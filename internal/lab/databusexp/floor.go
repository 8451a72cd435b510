package databusexp

// The gateway's floor: the databus API as a bare grpc-go server with the
// gateway's transport settings (hlab serve grpcfloor), measured beside
// the gateway's echo and idle rows on the same quota. What the floor
// costs is grpc-go's and the kernel's on the machine; what the gateway
// costs beyond it is the gateway's own, and its targets bound that, so
// that they hold or fail alike on a machine with a dearer kernel.

import (
	"context"
	"fmt"

	"github.com/highload-lab/hlab/internal/gateway/grpcfloor"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/labresult"
)

// echoFloor is the floor's echo row, measured in rounds with echoBase on
// the same quota and GOMAXPROCS (scaling.go).
const echoFloor labresult.Key = "echo/c50/gomaxprocs-1/grpc-floor"

var echoFloorLabel = fmt.Sprintf("echo, %d clients: the floor (hlab serve grpcfloor: a bare grpc-go Recv/Send loop with the gateway's transport settings), 1 CPU, GOMAXPROCS=1", scaleClients)

// idleFloorShapes are the idle shapes measured on the floor too: the two
// of 10,000 streams, whose gateway rows are judged against it.
var idleFloorShapes = []idleShape{{10000, 10000}, {10000, 1000}}

func floored(s idleShape) bool {
	for _, f := range idleFloorShapes {
		if f == s {
			return true
		}
	}
	return false
}

func idleFloorKey(s idleShape) labresult.Key { return idleKey(s) + "/grpc-floor" }

func idleFloorLabel(s idleShape) string {
	return idleLabel(s) + ", the floor (hlab serve grpcfloor)"
}

// The gateway's bounds against its floor.
const (
	// targetEchoOverFloor is the least the gateway's echo round trips per
	// CPU-second may be of the floor's.
	targetEchoOverFloor = 0.95
	// targetIdleOverFloorKB is the most RSS an idle stream may cost the
	// gateway beyond what it costs the floor.
	targetIdleOverFloorKB = 1
)

var rssKBOverFloor = labresult.Metric{Name: "rss_kb_per_stream_over_floor", Unit: "KB", Better: labresult.Lower,
	Doc: "the gateway's RSS per idle stream less the floor's (hlab serve grpcfloor) in the same shape, measured next to it: the gateway's own memory per stream"}

// floorTargets bound the gateway's echo and idle rows against the floor's.
func floorTargets() []labresult.Target {
	t := []labresult.Target{{
		Key: "echo-over-grpc-floor-per-cpu",
		Text: fmt.Sprintf("echo at %d clients, 1 CPU, GOMAXPROCS=1: the gateway's round trips per CPU-second at least %.2fx the floor's (hlab serve grpcfloor, a bare grpc-go server of the same API with the same transport settings), in alternating rounds, paired by round",
			scaleClients, targetEchoOverFloor),
		Ratio: &labresult.Ratio{Num: echoBase, Den: echoFloor, Metric: roundTripsPerCPU.Name, Of: perCPURatio},
		Bound: labresult.AtLeast(targetEchoOverFloor),
	}}
	for _, s := range idleFloorShapes {
		conns, shape := "shared-connections", fmt.Sprintf("%d per connection", s.streams/s.conns)
		if s.conns == s.streams {
			conns, shape = "own-connections", "a connection each"
		}
		t = append(t, labresult.Target{
			Key: labresult.Key(fmt.Sprintf("idle-%d-streams-%s-over-floor", s.streams, conns)),
			Text: fmt.Sprintf("%s idle streams, %s: the gateway's RSS per stream at most the floor's + %d KB (hlab serve grpcfloor, the same streams measured next to it: what grpc-go itself holds per stream and connection)",
				thousands(s.streams), shape, targetIdleOverFloorKB),
			Row:    idleKey(s),
			Metric: rssKBOverFloor.Name, Unit: rssKBOverFloor.Unit,
			Bound: labresult.AtMost(targetIdleOverFloorKB),
		})
	}
	return t
}

// startFloor starts a floor under the gateway's quota; GOMAXPROCS 0 is
// Go's own, as a gateway's without --gomaxprocs.
func (b *bench) startFloor(ctx context.Context, gomaxprocs int) (*lab.Gateway, error) {
	return b.run.StartGRPCFloor(ctx, gatewayCPU, gatewayMemMB, grpcfloor.Config{GOMAXPROCS: gomaxprocs})
}
