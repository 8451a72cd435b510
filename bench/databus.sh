#!/usr/bin/env bash
# databus.sh: the databus gateway's speed targets (issue 3, report D), with
# the gateway on CPU 0 (GOMAXPROCS=1) and the checker on CPU 1:
#
#   echo                 >= 100,000 round trips per gateway CPU-second (50
#                           clients, one message per request, each answer
#                           awaited; the report's 300k msg/s on 4 cores is
#                           75k per core): round trips over the gateway's
#                           user+system CPU seconds, which a busy machine or
#                           a checker that cannot keep up does not bend
#   throughput publish   >= 200,000 msgs/s through kfake (10 clients, batches
#                           of 100, 16 in flight, aggregation off)
#   idle streams         <= 12 KB of gateway RSS per stream at 10,000 streams
#                           on 1,000 connections, <= 20 KB with a connection
#                           each
#
# Beside the echo and idle figures, in the same rounds, bench/grpcfloor: the
# databus API's Publish as a bare grpc-go Recv/Send loop with the gateway's
# transport settings. It is the floor those figures can reach while the
# gateway keeps grpc-go: what grpc-go and the kernel cost on this machine.
# The gateway's ratio to it is its own work, and is the figure to compare
# across machines.
#
# Beside them, with no stated target (info lines): subscribe, 1 group x 4
# members draining a topic filled beforehand (databus-checker --consume
# only, a fresh group each round): get-ack cycles/s and msgs/s, and both
# per gateway CPU-second, the gateway's CPU read from /proc over each
# drain's checker run alone (the members' joining and leaving included,
# the publishing that filled the topic not).
#
# kfake (hlab serve kfake, in memory) shares CPU 1 with the checker. Each
# figure is the median of ROUNDS runs; the throughput rounds are verified
# (every acked message consumed, 0 lost) once publishing ended. The idle
# streams open IDLE_CONNECTIONS connections (default 1,000: ten streams per
# connection; one process holds at most RLIMIT_NOFILE connections) on a
# fresh gateway, then one connection per stream; each is judged.
# Prints PASS/FAIL per target and exits 1 if any FAILs.
#
# Usage: bench/databus.sh             (from anywhere in the repo)
# Environment:
#   HLAB=./bin/hlab   the hlab binary     ROUNDS=3          runs per figure
#   DURATION=5s       measured per run    WARMUP=1s
#   ECHO_CLIENTS=50   THROUGHPUT_CLIENTS=10
#   IDLE_STREAMS=10000  IDLE_CONNECTIONS=1000 (and one connection per stream)
#   SUB_MEMBERS=4     members of the subscribe group
#   SUB_FILL=2s       publishing that fills the subscribe topic (about
#                     400,000 messages a second here; each drain reads them all)
#   SECTIONS="echo throughput subscribe idle"   the sections to run
set -euo pipefail

cd "$(dirname "$0")/.."
HLAB=${HLAB:-./bin/hlab}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
WARMUP=${WARMUP:-1s}
ECHO_CLIENTS=${ECHO_CLIENTS:-50}
THROUGHPUT_CLIENTS=${THROUGHPUT_CLIENTS:-10}
IDLE_STREAMS=${IDLE_STREAMS:-10000}
IDLE_CONNECTIONS=${IDLE_CONNECTIONS:-1000}
SUB_MEMBERS=${SUB_MEMBERS:-4}
SUB_FILL=${SUB_FILL:-2s}
SECTIONS=${SECTIONS:-echo throughput subscribe idle}
ECHO_TARGET=100000
THROUGHPUT_TARGET=200000
IDLE_TARGET_KB=12     # 10 streams per connection
IDLE_TARGET_KB_OWN=20 # a connection per stream

die() { echo "databus bench: $*" >&2; exit 2; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json() { python3 -c 'import json,sys; r=json.load(sys.stdin); print(eval(sys.argv[1], {}, {"r": r}))' "$1"; }
median() { python3 -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
spread() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print(f"{min(v):,.0f}-{max(v):,.0f}")' "$@"; }
ge() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2"; }
fmt() { python3 -c 'import sys; print(f"{float(sys.argv[1]):,.0f}")' "$1"; }

[ -x "$HLAB" ] || die "no hlab binary at $HLAB (make build, or set HLAB=path)"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs: the gateway gets CPU 0, the checker CPU 1"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
command -v curl >/dev/null || die "curl not found"
want() { [[ " $SECTIONS " == *" $1 "* ]]; }
need_fds=$((IDLE_STREAMS + 100))
want idle || need_fds=1024
[ "$(ulimit -Hn)" -ge "$need_fds" ] || die "RLIMIT_NOFILE hard limit $(ulimit -Hn) < $need_fds: raise it (ulimit -Hn) or lower IDLE_STREAMS"
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/databus-checker" ./cmd/databus-checker
go build -o "$work/grpcfloor" ./bench/grpcfloor
CHECKER="$work/databus-checker"

await() { # await URL PID NAME
	for _ in $(seq 100); do
		kill -0 "$2" 2>/dev/null || die "$3 exited: $(tail -5 "$work/$3.log")"
		curl -sf "$1" >/dev/null && return 0
		sleep 0.1
	done
	die "$3 not ready at $1: $(tail -5 "$work/$3.log")"
}

# kfake on CPU 1, beside the checker.
KAFKA=127.0.0.1:$(freeport)
KHTTP=127.0.0.1:$(freeport)
taskset -c 1 "$HLAB" serve kfake --addr "$KHTTP" --kafka-addr "$KAFKA" --partitions 10 >"$work/kfake.log" 2>&1 &
KFAKE_PID=$!
pids+=("$KFAKE_PID")
await "http://$KHTTP/healthz" "$KFAKE_PID" kfake

GW_PID=
GRPC=
GHTTP=
start_gateway() { # start_gateway FLAGS...: a fresh gateway on CPU 0
	start_server "$HLAB" serve databus "$@"
}
start_floor() { # start_floor: a fresh bench/grpcfloor on CPU 0, in the gateway's place
	start_server "$work/grpcfloor"
}
start_server() { # start_server COMMAND...: on CPU 0, serving --addr and --grpc-addr
	stop_gateway
	GRPC=127.0.0.1:$(freeport)
	GHTTP=127.0.0.1:$(freeport)
	GOMAXPROCS=1 taskset -c 0 "$@" --addr "$GHTTP" --grpc-addr "$GRPC" >"$work/gateway.log" 2>&1 &
	GW_PID=$!
	pids+=("$GW_PID")
	await "http://$GHTTP/healthz" "$GW_PID" gateway
}
stop_gateway() {
	if [ -n "$GW_PID" ]; then
		kill "$GW_PID" 2>/dev/null || true
		wait "$GW_PID" 2>/dev/null || true
		GW_PID=
	fi
}
checker() { # checker ARGS...: the checker on CPU 1, its JSON on stdout (exit 1 = lost messages: still JSON)
	local rc=0
	taskset -c 1 "$CHECKER" --target "$GRPC" --quiet --json "$@" >"$work/checker.json" 2>"$work/checker.err" || rc=$?
	if [ "$rc" -gt 1 ] || ! grep -q '"scenario"' "$work/checker.json"; then
		echo "databus bench: checker failed ($*): $(tail -5 "$work/checker.err")" >&2
		exit 2
	fi
	cat "$work/checker.json"
}

fails=0
verdict() { # verdict OK? LINE
	if [ "$1" = 1 ]; then echo "PASS  $2"; else echo "FAIL  $2"; fails=$((fails + 1)); fi
}

echo "databus bench: gateway on CPU 0 (GOMAXPROCS=1), checker and kfake on CPU 1; $ROUNDS rounds of $DURATION after $WARMUP warm-up" >&2
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine lowers these figures)" >&2

# The gateway's CPU time (user+system, seconds) and the wall clock, to say
# how much of its core it used and what a message cost: when another
# process takes CPU 0, the gateway uses less than a core and the rate
# drops, while the cost per message stays about the same.
gw_cpu() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$GW_PID/stat"; }
now() { date +%s.%N; }
cost() { # cost CPU0 CPU1 T0 T1 MESSAGES -> "cores, us/msg"
	python3 -c 'import sys; c0,c1,t0,t1,n=map(float,sys.argv[1:]); c=c1-c0; print(f"gateway used {c/(t1-t0):.2f} cores, {c/n*1e6:.1f} us of CPU per message")' "$@"
}

# 1. Echo: round trips per gateway CPU-second (rps beside it).
per_cpu_s() { # per_cpu_s CPU0 CPU1 MESSAGES
	python3 -c 'import sys; c0,c1,n=map(float,sys.argv[1:]); print(n/(c1-c0))' "$@"
}
if want echo; then # section 1
echo_once() { # echo_once NAME ROUND: one measured echo run on the server running; prints its round trips per CPU-second
	local c0 c1 t0 t1 out r acked p
	checker --scenario echo --streams "$ECHO_CLIENTS" --warmup 1s --duration 1s >/dev/null # warm the server up
	c0=$(gw_cpu); t0=$(now)
	out=$(checker --scenario echo --streams "$ECHO_CLIENTS" --warmup "$WARMUP" --duration "$DURATION")
	c1=$(gw_cpu); t1=$(now)
	r=$(echo "$out" | json 'r["msgs_per_s"]')
	acked=$(echo "$out" | json 'r["acked"]')
	p=$(per_cpu_s "$c0" "$c1" "$acked")
	echo "  echo round $2, $1: $(fmt "$p") round trips per CPU-second, $(fmt "$r") round trips/s; $(cost "$c0" "$c1" "$t0" "$t1" "$acked" | sed "s/gateway/$1/")" >&2
	echo "$p"
}
# Gateway and floor alternate, a fresh server each run, so that a busy
# stretch of the machine falls on both.
echo_runs=()
floor_runs=()
ratio_runs=()
for i in $(seq "$ROUNDS"); do
	start_gateway --echo
	g=$(echo_once gateway "$i")
	start_floor
	f=$(echo_once grpcfloor "$i")
	echo_runs+=("$g")
	floor_runs+=("$f")
	ratio_runs+=("$(python3 -c "print($g/$f)")")
done
echo_med=$(median "${echo_runs[@]}")
ok=0; ge "$echo_med" "$ECHO_TARGET" && ok=1
verdict $ok "echo, $ECHO_CLIENTS clients, 1 msg/request: $(fmt "$echo_med") round trips per gateway CPU-second (median of $ROUNDS, $(spread "${echo_runs[@]}"); $(python3 -c "print(f'{$echo_med/$ECHO_TARGET:.2f}')")x the target of $(fmt $ECHO_TARGET))"
echo "info  echo floor (bench/grpcfloor, a bare grpc-go Recv/Send loop): $(fmt "$(median "${floor_runs[@]}")") round trips per CPU-second ($(spread "${floor_runs[@]}")); the gateway does $(python3 -c "print(f'{$(median "${ratio_runs[@]}"):.2f}')")x the floor's round trips per CPU-second (median of each round's ratio, $(python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(f'{min(v):.2f}-{max(v):.2f}')" "${ratio_runs[@]}")): the target is $(python3 -c "print(f'{$ECHO_TARGET/$(median "${floor_runs[@]}"):.2f}')")x what grpc-go itself reaches here"
start_gateway --echo
# Beside it, not judged: the same clients pipelining 16 requests each, so
# that reads and writes carry several messages per system call.
c0=$(gw_cpu); t0=$(now)
out=$(checker --scenario echo --streams "$ECHO_CLIENTS" --inflight 16 --warmup "$WARMUP" --duration "$DURATION")
c1=$(gw_cpu); t1=$(now)
echo "info  echo, $ECHO_CLIENTS clients, 16 requests in flight each: $(fmt "$(echo "$out" | json 'r["msgs_per_s"]')") msgs/s; $(cost "$c0" "$c1" "$t0" "$t1" "$(echo "$out" | json 'r["acked"]')")"

fi

# 2. Throughput-optimized publish through kfake, verified.
if want throughput; then # section 2
start_gateway --brokers "$KAFKA"
thr_runs=()
lost_total=0
for i in $(seq "$ROUNDS"); do
	c0=$(gw_cpu); t0=$(now)
	out=$(checker --scenario throughput --streams "$THROUGHPUT_CLIENTS" --batch 100 --inflight 16 \
		--topic "bench-$$-$i" --brokers "$KAFKA" --warmup "$WARMUP" --duration "$DURATION" \
		--groups 1 --members 2 --consume after)
	c1=$(gw_cpu); t1=$(now)
	r=$(echo "$out" | json 'r["msgs_per_s"]')
	lost=$(echo "$out" | json 'r["delivery"]["lost"]')
	acked=$(echo "$out" | json 'r["delivery"]["acked"]')
	echo "  throughput round $i: $(fmt "$r") msgs/s; $acked acked, $lost lost; $(cost "$c0" "$c1" "$t0" "$t1" "$((acked * 2))") (published and consumed)" >&2
	thr_runs+=("$r")
	lost_total=$((lost_total + lost))
done
thr_med=$(median "${thr_runs[@]}")
ok=0; ge "$thr_med" "$THROUGHPUT_TARGET" && [ "$lost_total" = 0 ] && ok=1
verdict $ok "throughput-optimized publish, $THROUGHPUT_CLIENTS clients x batches of 100, kfake: $(fmt "$thr_med") msgs/s (median of $ROUNDS; target >= $(fmt $THROUGHPUT_TARGET)); $lost_total lost"

fi

# 3. Subscribe (no stated target): 1 group x SUB_MEMBERS members drain a
# topic filled beforehand, ROUNDS times, a fresh group each (--consume only:
# every record the topic holds must reach it). The gateway's CPU is read
# around each drain's checker run, so it covers consuming alone. The
# checker verifying every record and kfake share CPU 1: when the gateway
# uses well under its core, they, not the gateway, set the rate per second;
# the figures per gateway CPU-second hold either way.
if want subscribe; then # section 3
start_gateway --brokers "$KAFKA"
sub_topic="bench-sub-$$"
filled=$(checker --scenario throughput --streams "$THROUGHPUT_CLIENTS" --batch 100 --inflight 16 \
	--topic "$sub_topic" --brokers "$KAFKA" --warmup 0 --duration "$SUB_FILL" | json 'r["acked"]')
drain() { checker --consume only --groups 1 --members "$SUB_MEMBERS" --sub-batch 100 --topic "$sub_topic" --brokers "$KAFKA" --drain-timeout 120s; }
drain >/dev/null # warm the gateway's subscribe path up
get() { echo "$out" | json "r['delivery']['$1']"; } # get FIELD: of the last drain's delivery
cps_runs=()
rps_runs=()
cyc_runs=()
msg_runs=()
sub_lost=0
for i in $(seq "$ROUNDS"); do
	c0=$(gw_cpu)
	out=$(drain)
	c1=$(gw_cpu)
	cyc=$(per_cpu_s "$c0" "$c1" "$(get cycles)")
	msg=$(per_cpu_s "$c0" "$c1" "$(get received)")
	echo "  subscribe round $i: $(fmt "$(get cycles_per_s)") get-ack cycles/s, $(fmt "$(get received_per_s)") msgs/s over a $(printf %.2f "$(get drain_s)") s drain; per gateway CPU-second $(fmt "$cyc") cycles, $(fmt "$msg") msgs ($(python3 -c "print(f'{$c1-$c0:.2f} s of gateway CPU, {($c1-$c0)/$(get drain_s):.2f} cores')")); $(get acked) records, $(get lost) lost" >&2
	cps_runs+=("$(get cycles_per_s)")
	rps_runs+=("$(get received_per_s)")
	cyc_runs+=("$cyc")
	msg_runs+=("$msg")
	sub_lost=$((sub_lost + $(get lost)))
done
echo "info  subscribe, 1 group x $SUB_MEMBERS members draining $(fmt "$filled") messages (batches of up to 100): $(fmt "$(median "${cps_runs[@]}")") get-ack cycles/s ($(spread "${cps_runs[@]}")), $(fmt "$(median "${rps_runs[@]}")") msgs/s ($(spread "${rps_runs[@]}")); per gateway CPU-second $(fmt "$(median "${cyc_runs[@]}")") get-ack cycles ($(spread "${cyc_runs[@]}")) and $(fmt "$(median "${msg_runs[@]}")") msgs ($(spread "${msg_runs[@]}")), median of $ROUNDS drains; $sub_lost lost; no target is stated for subscribe"
[ "$sub_lost" = 0 ] || verdict 0 "subscribe lost $sub_lost records: every record the topic held must reach every group"
fi

# 4. Idle streams: RSS per stream, on a fresh server each, the gateway's
# beside the floor's.
if want idle; then # section 4
idle() { # idle gateway|floor CONNECTIONS -> KB per stream
	if [ "$1" = gateway ]; then start_gateway --brokers "$KAFKA"; else start_floor; fi
	checker --scenario ticker --streams "$IDLE_STREAMS" --connections "$2" --aggregation --interval 1h \
		--warmup 0 --duration 100ms --topic "bench-idle-$$-$1-$2" --brokers "$KAFKA" \
		--gateway-metrics "http://$GHTTP/metrics" --settle 3s | json 'r["gateway"]["rss_kb_per_stream"]'
}
for shape in "$IDLE_CONNECTIONS $IDLE_TARGET_KB" "$IDLE_STREAMS $IDLE_TARGET_KB_OWN"; do
	read -r conns target <<<"$shape"
	kb=$(idle gateway "$conns")
	floor=$(idle floor "$conns")
	ok=0; ge "$target" "$kb" && ok=1
	verdict $ok "$(fmt "$IDLE_STREAMS") idle streams on $(fmt "$conns") connections: $(printf %.1f "$kb") KB gateway RSS per stream (target <= $target KB); the floor (bench/grpcfloor) $(printf %.1f "$floor") KB"
	[ "$IDLE_CONNECTIONS" != "$IDLE_STREAMS" ] || break
done
fi
stop_gateway

if [ "$fails" -gt 0 ]; then
	echo "databus bench: $fails target(s) FAILED" >&2
	exit 1
fi
echo "databus bench: every target met" >&2
