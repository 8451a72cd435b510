#!/usr/bin/env bash
# databus.sh: the databus gateway's speed targets (report D), with
# the gateway on CPU 0 (GOMAXPROCS=1) and the checker on CPU 1:
#
#   echo                 the gateway's round trips per CPU-second >= 0.95x the
#                           floor's (below), 50 clients, one message per
#                           request, each answer awaited: round trips over
#                           the server's user+system CPU seconds, which a
#                           busy machine or a checker that cannot keep up
#                           does not bend; gateway and floor alternate, a
#                           fresh server each run, and the verdict is on the
#                           median of the per-round ratios (their spread
#                           beside it). The absolute figure is an info line
#                           beside the report's 300k msg/s on 4 cores (75k
#                           per core) and our old bound of 100,000, which sat
#                           below what grpc-go itself costs on a 2-core VM
#   throughput publish   >= 200,000 msgs/s through kfake (10 clients, batches
#                           of 100, 16 in flight, aggregation off)
#   idle streams         the gateway's RSS per stream <= the floor's + 1 KB,
#                           10,000 streams on 1,000 connections and with a
#                           connection each, each on a fresh server, the
#                           gateway's and the floor's in turn
#   publish cost         the gateway's CPU per message <= 1.2x that of a
#                           franz-go producer writing straight to Kafka
#                           (databus-checker --direct: 10 clients, no linger,
#                           acks=all, batches of 100, 16 in flight), both
#                           offered COST_RATE msgs/s (the same records per
#                           produce request), each on CPU 0 in turn, in
#                           rounds alternating which goes first; judged on
#                           the median of the per-round ratios; through
#                           kfake, and through the real broker when it
#                           runs; the pair at full speed beside it (info)
#   (info) Kafka's own producer, real broker only: kafka-producer-perf-test
#                           (ProducerPerformance, 100-byte records, acks=all)
#                           on CPU 0, its records per JVM CPU-second beside
#                           the gateway's msgs per gateway CPU-second
#
# The floor of the echo and idle targets is hlab serve grpcfloor, run in
# the gateway's place on the same core: the databus API's Publish as a bare
# grpc-go Recv/Send loop with the gateway's transport settings. It is what
# those figures can reach while the gateway keeps grpc-go: what grpc-go and
# the kernel cost on this machine. What the gateway costs beyond it is its
# own work, the figure the targets bound and the one to compare across
# machines.
#
#   subscribe cost       the gateway's CPU per delivered message <= 1.3x
#                           that of franz-go consumers reading Kafka
#                           themselves (databus-checker --direct --consume
#                           only: a group member per member with the
#                           gateway's balancer and fetch sizes, batches of
#                           100 acked as they come, only acked records
#                           committed), 1 group x 4 members draining a
#                           topic filled beforehand, a fresh group each
#                           drain, each on CPU 0 in turn, in rounds
#                           alternating which goes first; judged on the
#                           median of the per-round ratios. Beside it
#                           (info): get-ack cycles/s and msgs/s, and both
#                           per gateway CPU-second, the gateway's CPU read
#                           from /proc over each drain's checker run alone
#                           (the members' joining and leaving included,
#                           the publishing that filled the topic not); the
#                           direct consumers' is their own process's over
#                           the drain (consume_cpu_s)
#
# The real broker (hlab deps up kafka-real, on CPU 1) runs when KAFKA_REAL=1, or
# with KAFKA_REAL=auto (the default) when 'hlab deps status' says it is
# installed; KAFKA_REAL=0 keeps everything on kfake.
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
#   KAFKA_REAL=auto|1|0   PERF_RECORDS=2000000 (the perf test's records)
#   COST_RATE=200000  msgs/s both sides of the publish cost target are offered
#   ONLY=echo,throughput,subscribe,idle,cost,perf   the sections to run (default all)
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
ECHO_TARGET=0.95    # the gateway's round trips per CPU-second over the floor's
ECHO_OLD_TARGET=100000 # round trips per CPU-second: shown, not judged
THROUGHPUT_TARGET=200000
IDLE_TARGET_KB=1    # the gateway's RSS per idle stream beyond the floor's
COST_TARGET=1.2
COST_RATE=${COST_RATE:-200000}
SUB_COST_TARGET=1.3
KAFKA_REAL=${KAFKA_REAL:-auto}
PERF_RECORDS=${PERF_RECORDS:-2000000}
ONLY=${ONLY:-echo,throughput,subscribe,idle,cost,perf}
want() { [[ ",$ONLY," == *",$1,"* ]]; }

die() { echo "databus bench: $*" >&2; exit 2; }
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json() { python3 -c 'import json,sys; r=json.load(sys.stdin); print(eval(sys.argv[1], {}, {"r": r}))' "$1"; }
median() { python3 -c 'import sys, statistics; print(statistics.median(float(x) for x in sys.argv[1:]))' "$@"; }
spread() { python3 -c 'import sys; v=[float(x) for x in sys.argv[1:]]; print(f"{min(v):,.0f}-{max(v):,.0f}")' "$@"; }
spread_s() { python3 -c 'import sys, statistics; v=[float(x) for x in sys.argv[1:]]; print(f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})")' "$@"; }
ge() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= float(sys.argv[2]) else 1)' "$1" "$2"; }
fmt() { python3 -c 'import sys; print(f"{float(sys.argv[1]):,.0f}")' "$1"; }

[ -x "$HLAB" ] || die "no hlab binary at $HLAB (make build, or set HLAB=path)"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs: the gateway gets CPU 0, the checker CPU 1"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
command -v curl >/dev/null || die "curl not found"
need_fds=$((IDLE_STREAMS + 100))
want idle || need_fds=1024
[ "$(ulimit -Hn)" -ge "$need_fds" ] || die "RLIMIT_NOFILE hard limit $(ulimit -Hn) < $need_fds: raise it (ulimit -Hn) or lower IDLE_STREAMS"
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d)
pids=()
REAL_DIR=
cleanup() {
	[ -z "$REAL_DIR" ] || "$HLAB" deps down kafka-real --purge --state-dir "$REAL_DIR" >/dev/null 2>&1 || true
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/databus-checker" ./cmd/databus-checker
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
start_floor() { # start_floor: a fresh floor (hlab serve grpcfloor) on CPU 0, in the gateway's place
	start_server "$HLAB" serve grpcfloor
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

echo "databus bench: gateway on CPU 0 (GOMAXPROCS=1), checker and kfake on CPU 1; sections $ONLY; $ROUNDS rounds of $DURATION after $WARMUP warm-up" >&2
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
# Gateway and floor alternate, a fresh server each run, the order turning
# each round (gateway first, then floor first), so that a busy stretch of
# the machine or a place in the round falls on both.
echo_runs=()
floor_runs=()
ratio_runs=()
echo_gateway() { start_gateway --echo; g=$(echo_once gateway "$i"); }
echo_floor() { start_floor; f=$(echo_once grpcfloor "$i"); }
for i in $(seq "$ROUNDS"); do
	if [ $((i % 2)) = 1 ]; then echo_gateway; echo_floor; else echo_floor; echo_gateway; fi
	echo_runs+=("$g")
	floor_runs+=("$f")
	ratio_runs+=("$(python3 -c "print($g/$f)")")
done
echo_med=$(median "${echo_runs[@]}")
floor_med=$(median "${floor_runs[@]}")
ratio_med=$(median "${ratio_runs[@]}")
ok=0; ge "$ratio_med" "$ECHO_TARGET" && ok=1
verdict $ok "echo, $ECHO_CLIENTS clients, 1 msg/request: the gateway does $(printf %.2f "$ratio_med")x the floor's round trips per CPU-second (median of $ROUNDS rounds' ratios, $(python3 -c "import sys; v=[float(x) for x in sys.argv[1:]]; print(f'{min(v):.2f}-{max(v):.2f}')" "${ratio_runs[@]}"); target >= ${ECHO_TARGET}x)"
echo "info  echo, $ECHO_CLIENTS clients: gateway $(fmt "$echo_med") round trips per CPU-second ($(spread "${echo_runs[@]}")), the floor (hlab serve grpcfloor, a bare grpc-go Recv/Send loop) $(fmt "$floor_med") ($(spread "${floor_runs[@]}")), median of $ROUNDS; the old bound of $(fmt $ECHO_OLD_TARGET) is $(python3 -c "print(f'{$ECHO_OLD_TARGET/$floor_med:.2f}')")x what grpc-go itself reaches here"
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

# 3. Subscribe: 1 group x SUB_MEMBERS members drain a topic filled
# beforehand, ROUNDS times, a fresh group each (--consume only: every
# record the topic holds must reach it), through the gateway and, in the
# same rounds, straight from Kafka (--direct: franz-go consumers acking
# and committing as the gateway's subscribers do), each on CPU 0 in turn,
# alternating which goes first. The gateway's CPU is read around each
# drain's checker run, so it covers consuming alone. The checker
# verifying every record and kfake share CPU 1: when the gateway uses
# well under its core, they, not the gateway, set the rate per second;
# the figures per CPU-second hold either way.
if want subscribe; then # section 3
start_gateway --brokers "$KAFKA"
sub_topic="bench-sub-$$"
filled=$(checker --scenario throughput --streams "$THROUGHPUT_CLIENTS" --batch 100 --inflight 16 \
	--topic "$sub_topic" --brokers "$KAFKA" --warmup 0 --duration "$SUB_FILL" | json 'r["acked"]')
sub_args=(--consume only --groups 1 --members "$SUB_MEMBERS" --sub-batch 100 --topic "$sub_topic" --brokers "$KAFKA" --drain-timeout 120s)
drain() { checker "${sub_args[@]}"; }
drain >/dev/null # warm the gateway's subscribe path up
get() { echo "$out" | json "r['delivery']['$1']"; } # get FIELD: of the last drain's delivery
cps_runs=()
rps_runs=()
cyc_runs=()
msg_runs=()
sub_gw_us=()
sub_direct_us=()
sub_ratios=()
sub_lost=0
sub_gw_run() {
	local c0 c1 cyc msg
	c0=$(gw_cpu)
	out=$(drain)
	c1=$(gw_cpu)
	cyc=$(per_cpu_s "$c0" "$c1" "$(get cycles)")
	msg=$(per_cpu_s "$c0" "$c1" "$(get received)")
	g=$(python3 -c "print(($c1-$c0)/$(get received)*1e6)")
	echo "  subscribe round $i, gateway: $(fmt "$(get cycles_per_s)") get-ack cycles/s, $(fmt "$(get received_per_s)") msgs/s over a $(printf %.2f "$(get drain_s)") s drain; per gateway CPU-second $(fmt "$cyc") cycles, $(fmt "$msg") msgs ($(python3 -c "print(f'{$c1-$c0:.2f} s of gateway CPU, {($c1-$c0)/$(get drain_s):.2f} cores')")), $(printf %.2f "$g") us per message; $(get acked) records, $(get lost) lost" >&2
	cps_runs+=("$(get cycles_per_s)")
	rps_runs+=("$(get received_per_s)")
	cyc_runs+=("$cyc")
	msg_runs+=("$msg")
	sub_lost=$((sub_lost + $(get lost)))
}
sub_direct_run() {
	local rc=0
	GOMAXPROCS=1 taskset -c 0 "$CHECKER" --direct --quiet --json "${sub_args[@]}" >"$work/direct-sub.json" 2>"$work/direct-sub.err" || rc=$?
	if [ "$rc" -gt 1 ] || ! grep -q '"delivery"' "$work/direct-sub.json"; then
		die "direct consumer failed: $(tail -5 "$work/direct-sub.err")"
	fi
	out=$(cat "$work/direct-sub.json")
	d=$(python3 -c "import json; r=json.load(open('$work/direct-sub.json')); print(r['consume_cpu_s']/r['delivery']['received']*1e6)")
	echo "  subscribe round $i, direct: $(fmt "$(get received_per_s)") msgs/s over a $(printf %.2f "$(get drain_s)") s drain, $(printf %.2f "$d") us of CPU per message ($(printf %.2f "$(echo "$out" | json 'r["consume_cpu_s"]')") CPU-s); $(get lost) lost" >&2
	sub_lost=$((sub_lost + $(get lost)))
}
for i in $(seq "$ROUNDS"); do
	if [ $((i % 2)) = 1 ]; then sub_gw_run; sub_direct_run; else sub_direct_run; sub_gw_run; fi
	sub_gw_us+=("$g"); sub_direct_us+=("$d")
	sub_ratios+=("$(python3 -c "print($g/$d)")")
done
sub_med=$(median "${sub_ratios[@]}")
ok=0; python3 -c "import sys; sys.exit(0 if $sub_med <= $SUB_COST_TARGET else 1)" && [ "$sub_lost" = 0 ] && ok=1
verdict $ok "subscribe cost, 1 group x $SUB_MEMBERS members draining $(fmt "$filled") messages, batches of 100: gateway $(spread_s "${sub_gw_us[@]}") us/msg, direct franz-go $(spread_s "${sub_direct_us[@]}") us/msg; ratio $(spread_s "${sub_ratios[@]}") over $ROUNDS rounds, $(python3 -c "print(f'{$sub_med/$SUB_COST_TARGET:.2f}')")x the target of <= ${SUB_COST_TARGET}x; $sub_lost lost"
echo "info  subscribe through the gateway: $(fmt "$(median "${cps_runs[@]}")") get-ack cycles/s ($(spread "${cps_runs[@]}")), $(fmt "$(median "${rps_runs[@]}")") msgs/s ($(spread "${rps_runs[@]}")); per gateway CPU-second $(fmt "$(median "${cyc_runs[@]}")") get-ack cycles ($(spread "${cyc_runs[@]}")) and $(fmt "$(median "${msg_runs[@]}")") msgs ($(spread "${msg_runs[@]}")), median of $ROUNDS drains"
[ "$sub_lost" = 0 ] || verdict 0 "subscribe lost $sub_lost records: every record the topic held must reach every group"
fi

# 4. Idle streams: RSS per stream, on a fresh server each, the gateway's
# beside the floor's.
if want idle; then # section 4
# idle sets IDLE_KB rather than printing it: run in $(...), the server it
# starts would be the subshell's, and never stopped.
idle() { # idle gateway|floor CONNECTIONS: sets IDLE_KB, the server's KB per stream
	if [ "$1" = gateway ]; then start_gateway --brokers "$KAFKA"; else start_floor; fi
	IDLE_KB=$(checker --scenario ticker --streams "$IDLE_STREAMS" --connections "$2" --aggregation --interval 1h \
		--warmup 0 --duration 100ms --topic "bench-idle-$$-$1-$2" --brokers "$KAFKA" \
		--gateway-metrics "http://$GHTTP/metrics" --settle 3s | json 'r["gateway"]["rss_kb_per_stream"]')
}
# The two shapes alternate which server goes first.
first=gateway
for conns in "$IDLE_CONNECTIONS" "$IDLE_STREAMS"; do
	if [ "$first" = gateway ]; then
		idle gateway "$conns"; kb=$IDLE_KB; idle floor "$conns"; floor=$IDLE_KB; first=floor
	else
		idle floor "$conns"; floor=$IDLE_KB; idle gateway "$conns"; kb=$IDLE_KB; first=gateway
	fi
	over=$(python3 -c "print($kb - $floor)")
	ok=0; ge "$IDLE_TARGET_KB" "$over" && ok=1
	verdict $ok "$(fmt "$IDLE_STREAMS") idle streams on $(fmt "$conns") connections: $(printf %.1f "$kb") KB gateway RSS per stream, the floor (hlab serve grpcfloor) $(printf %.1f "$floor") KB: $(printf %+.1f "$over") KB beyond it (target <= floor + $IDLE_TARGET_KB KB)"
	[ "$IDLE_CONNECTIONS" != "$IDLE_STREAMS" ] || break
done
stop_gateway
fi

# 5. Publish cost: the gateway's CPU per message against a franz-go
# producer's writing straight to the same Kafka (databus-checker --direct:
# a kgo client per stream, no linger, acks=all), each on CPU 0 with
# GOMAXPROCS=1 in turn, the same clients, batches, values and topic shape.
# The gateway's CPU is its user+system seconds over the checker's run
# (/proc/PID/stat); the direct producer's is its own process's over its
# publishing (publish_cpu_s, getrusage): both over opening, warm-up and
# window, per acked message. Rounds alternate which goes first.
# Most of a producer's cost per message is per Kafka produce request, and
# the faster it runs the more records each request carries: run as fast
# as each goes, the direct producer has CPU 0 alone while the gateway's
# checker shares CPU 1 with Kafka, so it runs faster for that alone. The
# target's pair is offered COST_RATE msgs/s on both sides (--rate, below
# what either reaches); the pair at full speed is shown beside it. Each
# side's records per produce request: the gateway's from its
# databus_kafka_requests_total, the direct producer's from its own count.
declare -A COST_GW_PER_CPU COST_BOTH_PER_CPU
below_rate() { # below_rate RATE MSGS_PER_S: a warning when a side did not reach the rate it was offered
	python3 -c 'import sys; r,m=map(float,sys.argv[1:]); print(f" -- BELOW the offered {r:,.0f} msgs/s: its records per produce request are not the other side'"'"'s" if r > 0 and m < 0.95*r else "")' "$1" "$2"
}
produce_requests() { curl -sf "http://$GHTTP/metrics" | awk '/^databus_kafka_requests_total\{api="Produce"\}/{print $2; f=1} END{if(!f) print 0}'; }
cost_section() { # cost_section KAFKA_ADDR NAME RATE (0: each as fast as it goes)
	local kafka=$1 name=$2 rate=$3 gw_us=() direct_us=() ratios=() gw_per=() both_per=() gw_rpr=() direct_rpr=() i g d rate_args=() what
	[ "$rate" = 0 ] || rate_args=(--rate "$rate")
	what="$name, $([ "$rate" = 0 ] && echo "each as fast as it goes" || echo "both offered $(fmt "$rate") msgs/s")"
	start_gateway --brokers "$kafka"
	gw_run() {
		local c0 c1 p0 p1 out acked ccpu
		c0=$(gw_cpu); p0=$(produce_requests)
		out=$(checker --scenario throughput --streams "$THROUGHPUT_CLIENTS" --batch 100 --inflight 16 "${rate_args[@]}" \
			--topic "bench-cost-$$-$name-$rate-gw" --brokers "$kafka" --warmup "$WARMUP" --duration "$DURATION")
		c1=$(gw_cpu); p1=$(produce_requests)
		acked=$(echo "$out" | json 'r["acked"]')
		ccpu=$(echo "$out" | json 'r["publish_cpu_s"]')
		g=$(python3 -c 'import sys; c0,c1,n=map(float,sys.argv[1:]); print((c1-c0)/n*1e6)' "$c0" "$c1" "$acked")
		gw_per+=("$(python3 -c 'import sys; c0,c1,n=map(float,sys.argv[1:]); print(n/(c1-c0))' "$c0" "$c1" "$acked")")
		both_per+=("$(python3 -c 'import sys; c0,c1,c,n=map(float,sys.argv[1:]); print(n/(c1-c0+c))' "$c0" "$c1" "$ccpu" "$acked")")
		gw_rpr+=("$(python3 -c 'import sys; p0,p1,n=map(float,sys.argv[1:]); print(n/max(p1-p0,1))' "$p0" "$p1" "$acked")")
		echo "  cost round $i, $what: gateway $(printf %.2f "$g") us of CPU per message ($(printf %.2f "$(python3 -c "print($c1-$c0)")") CPU-s for $acked messages, $(fmt "$(echo "$out" | json 'r["msgs_per_s"]')") msgs/s, $(fmt "${gw_rpr[-1]}") records per produce request; the checker $(printf %.2f "$ccpu") CPU-s)$(below_rate "$rate" "$(echo "$out" | json 'r["msgs_per_s"]')")" >&2
	}
	direct_run() {
		local out rc=0
		GOMAXPROCS=1 taskset -c 0 "$CHECKER" --direct --brokers "$kafka" --quiet --json --scenario throughput \
			--streams "$THROUGHPUT_CLIENTS" --batch 100 --inflight 16 "${rate_args[@]}" --topic "bench-cost-$$-$name-$rate-direct" \
			--warmup "$WARMUP" --duration "$DURATION" >"$work/direct.json" 2>"$work/direct.err" || rc=$?
		if [ "$rc" -gt 1 ] || ! grep -q '"scenario"' "$work/direct.json"; then
			die "direct producer failed: $(tail -5 "$work/direct.err")"
		fi
		out=$(cat "$work/direct.json")
		d=$(echo "$out" | json 'r["publish_cpu_s"] / r["acked"] * 1e6')
		direct_rpr+=("$(echo "$out" | json 'r["msgs_per_s"] * r["duration_s"] / max(r.get("kafka_produce_requests", 0), 1)')")
		echo "  cost round $i, $what: direct $(printf %.2f "$d") us of CPU per message ($(printf %.2f "$(echo "$out" | json 'r["publish_cpu_s"]')") CPU-s for $(echo "$out" | json 'r["acked"]') messages, $(fmt "$(echo "$out" | json 'r["msgs_per_s"]')") msgs/s, $(fmt "${direct_rpr[-1]}") records per produce request)$(below_rate "$rate" "$(echo "$out" | json 'r["msgs_per_s"]')")" >&2
	}
	for i in $(seq "$ROUNDS"); do
		if [ $((i % 2)) = 1 ]; then gw_run; direct_run; else direct_run; gw_run; fi
		gw_us+=("$g"); direct_us+=("$d")
		ratios+=("$(python3 -c 'import sys; print(float(sys.argv[1])/float(sys.argv[2]))' "$g" "$d")")
	done
	stop_gateway
	local med line
	med=$(median "${ratios[@]}")
	line="publish cost, $THROUGHPUT_CLIENTS clients x batches of 100, 16 in flight, $what: gateway $(spread_s "${gw_us[@]}") us/msg, direct franz-go $(spread_s "${direct_us[@]}") us/msg; ratio $(spread_s "${ratios[@]}") over $ROUNDS rounds; records per produce request: gateway $(fmt "$(median "${gw_rpr[@]}")"), direct $(fmt "$(median "${direct_rpr[@]}")")"
	if [ "$rate" = 0 ]; then
		echo "info  $line (the target's pair is the one at a matched rate)"
		COST_GW_PER_CPU[$name]=$(median "${gw_per[@]}")
		COST_BOTH_PER_CPU[$name]=$(median "${both_per[@]}")
	else
		ok=0; ge "$COST_TARGET" "$med" && ok=1
		verdict $ok "$line; $(python3 -c "print(f'{$med/$COST_TARGET:.2f}')")x the target of <= ${COST_TARGET}x"
	fi
}

# The real broker, on CPU 1 beside the checker (as kfake is).
REAL_KAFKA=
TOOLS=
if [ "$KAFKA_REAL" = auto ] && (want cost || want perf); then
	KAFKA_REAL=0
	# Read whole first: grep -q stopping early would SIGPIPE hlab, which
	# pipefail counts as a failure.
	deps=$("$HLAB" deps status 2>/dev/null || true)
	grep -q 'real broker kafka .* ready' <<<"$deps" && KAFKA_REAL=1
fi
if [ "$KAFKA_REAL" = 1 ] && (want cost || want perf); then
	# In the background under its supervisor, in a state directory of this
	# run's (stopped and removed at exit); the supervisor and the JVM
	# inherit the CPU affinity.
	REAL_DIR="$work/kafka-real"
	REAL_KAFKA=$(taskset -c 1 "$HLAB" deps up kafka-real --state-dir "$REAL_DIR" --timeout 120s 2>"$work/kafka-real.log") ||
		die "the real broker did not start (hlab deps install kafka): $(tail -5 "$work/kafka-real.log")"
	# Kafka's own tools (kafka-producer-perf-test) are not among the
	# broker's jars: fetched beside them.
	TOOLS=$("$HLAB" deps install kafka-tools 2>"$work/kafka-tools.log") ||
		{ echo "databus bench: kafka's tools (kafka-producer-perf-test) are not available: $(tail -3 "$work/kafka-tools.log")" >&2; TOOLS=; }
	echo "databus bench: real Kafka broker at $REAL_KAFKA (CPU 1)" >&2
fi

if want cost; then
	cost_section "$KAFKA" kfake "$COST_RATE"
	cost_section "$KAFKA" kfake 0
	if [ -n "$REAL_KAFKA" ]; then
		cost_section "$REAL_KAFKA" real "$COST_RATE"
		cost_section "$REAL_KAFKA" real 0
	else
		echo "skip  publish cost through the real broker: KAFKA_REAL=$KAFKA_REAL (hlab deps install kafka, then KAFKA_REAL=1)"
	fi
fi

# 6. Kafka's own producer benchmark at 1 CPU (CPU 0) against the real
# broker: records per JVM CPU-second (user+system of the JVM, its start
# included; a 1,000-record run gives the start's share), beside the
# gateway's msgs per gateway CPU-second from the publish cost rounds.
perf_test() { # perf_test RECORDS TOPIC -> the summary line; the JVM's CPU seconds in $work/perf.cpu
	GOMAXPROCS=1 taskset -c 0 /usr/bin/time -f '%U %S' -o "$work/perf.time" java -Xmx256M -server -XX:+UseG1GC \
		-XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
		-XX:MaxInlineLevel=15 -Djava.awt.headless=true -cp "$TOOLS/*" org.apache.kafka.tools.ProducerPerformance \
		--topic "$2" --num-records "$1" --record-size 100 --throughput -1 \
		--producer-props bootstrap.servers="$REAL_KAFKA" acks=all >"$work/perf.out" 2>&1 ||
		die "kafka-producer-perf-test failed: $(tail -5 "$work/perf.out")"
	awk '{print $1+$2}' "$work/perf.time" >"$work/perf.cpu"
	grep ' ms 99.9th' "$work/perf.out" | tail -1
}
create_topic() { # create_topic TOPIC: kafka-topics.sh's TopicCommand, on CPU 1 (the broker creates no topic on first use)
	taskset -c 1 java -Xmx256M -cp "$TOOLS/*" org.apache.kafka.tools.TopicCommand --bootstrap-server "$REAL_KAFKA" \
		--create --topic "$1" --partitions 10 --replication-factor 1 >"$work/topic.out" 2>&1 ||
		die "kafka-topics --create $1 failed: $(tail -5 "$work/topic.out")"
}
if want perf; then
	if [ -z "$REAL_KAFKA" ] || [ -z "$TOOLS" ]; then
		echo "skip  kafka-producer-perf-test: needs the real broker and Kafka's tools (KAFKA_REAL=$KAFKA_REAL; hlab deps install kafka, then KAFKA_REAL=1)"
	elif [ -z "${COST_GW_PER_CPU[real]:-}" ]; then
		echo "skip  kafka-producer-perf-test: the gateway's side comes from the publish cost rounds through the real broker (ONLY=...,cost,perf)"
	else
		# The topics: 10 partitions, as the gateway's.
		create_topic "bench-perf-$$-start"
		create_topic "bench-perf-$$"
		perf_test 1000 "bench-perf-$$-start" >/dev/null
		start_cpu=$(cat "$work/perf.cpu")
		line=$(perf_test "$PERF_RECORDS" "bench-perf-$$")
		[ -n "$line" ] || die "kafka-producer-perf-test printed no summary: $(tail -5 "$work/perf.out")"
		cpu=$(cat "$work/perf.cpu")
		rps=$(echo "$line" | sed -n 's/.* records sent, \([0-9.]*\) records\/sec.*/\1/p')
		perf_per=$(python3 -c 'import sys; print(float(sys.argv[1])/float(sys.argv[2]))' "$PERF_RECORDS" "$cpu")
		echo "  perf test: $line" >&2
		echo "  perf test: the JVM used $(printf %.2f "$cpu") CPU-s for $(fmt "$PERF_RECORDS") records ($(printf %.2f "$start_cpu") CPU-s for a 1,000-record run: its start and connection)" >&2
		gw_per=${COST_GW_PER_CPU[real]}
		both_per=${COST_BOTH_PER_CPU[real]}
		echo "info  against Kafka's own producer (100-byte records, acks=all, real broker, 1 CPU): gateway $(fmt "$gw_per") msgs per gateway CPU-second (gateway+checker $(fmt "$both_per")), kafka-producer-perf-test $(fmt "$perf_per") records per JVM CPU-second ($(fmt "$rps") records/s; $(fmt "$(python3 -c "print($PERF_RECORDS/max($cpu-$start_cpu,1e-3))")") without the JVM's start): $(python3 -c "print(f'{$gw_per/$perf_per:.2f}')")x (gateway+checker $(python3 -c "print(f'{$both_per/$perf_per:.2f}')")x)"
	fi
fi

if [ "$fails" -gt 0 ]; then
	echo "databus bench: $fails target(s) FAILED" >&2
	exit 1
fi
echo "databus bench: every target met" >&2
