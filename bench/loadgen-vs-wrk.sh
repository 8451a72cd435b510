#!/usr/bin/env bash
# loadgen-vs-wrk.sh: does "hlab load" (closed model) push a server as hard as
# wrk does? Both drive the same 1-core Go hello server, in alternating rounds
# so drift on the machine hits both alike; the server runs on CPU 0 and the
# generators on CPU 1, one core each. For each connection count it prints the
# median requests/sec of wrk and of hlab, their ratio, and PASS when hlab
# reaches at least MIN_RATIO of wrk. Exits non-zero if any count FAILs.
#
# Usage: bench/loadgen-vs-wrk.sh            (from anywhere in the repo)
# Environment:
#   HLAB=./bin/hlab   the hlab binary          CONNS="10 50"  connection counts
#   ROUNDS=3          rounds per tool          DURATION=5s    per round
#   ADDR=127.0.0.1:PORT   server address (default: a free port)
#   MIN_RATIO=0.90
set -euo pipefail

cd "$(dirname "$0")/.."
HLAB=${HLAB:-./bin/hlab}
CONNS=${CONNS:-"10 50"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
MIN_RATIO=${MIN_RATIO:-0.90}

die() { echo "loadgen-vs-wrk: $*" >&2; exit 2; }
accepts() { # does something accept TCP connections on $1?
	python3 -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); socket.create_connection((h,int(p)),0.2)" "$1" 2>/dev/null
}

[ -x "$HLAB" ] || die "no hlab binary at $HLAB (build it, or set HLAB=path)"
[ "$(nproc)" -ge 2 ] || die "needs 2 CPUs: the server gets CPU 0, the generator CPU 1"
command -v taskset >/dev/null || die "taskset not found (util-linux)"
command -v python3 >/dev/null || die "python3 not found"
if ! command -v wrk >/dev/null; then
	echo "installing wrk..." >&2
	apt-get update -qq && apt-get install -y -qq wrk >/dev/null || die "could not install wrk"
fi

if [ -z "${ADDR:-}" ]; then
	ADDR=127.0.0.1:$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
fi
URL="http://$ADDR/"
# Measuring someone else's server by mistake would be worse than failing.
accepts "$ADDR" && die "something already listens on $ADDR; set ADDR to a free address"

work=$(mktemp -d)
server_pid=
cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

go build -o "$work/hello" ./bench/hello
GOMAXPROCS=1 taskset -c 0 "$work/hello" -addr "$ADDR" 2>"$work/hello.log" &
server_pid=$!
for _ in $(seq 50); do
	kill -0 "$server_pid" 2>/dev/null || die "hello server exited: $(cat "$work/hello.log")"
	accepts "$ADDR" && break
	sleep 0.1
done
python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).read() != b"hello\n")' "$URL" ||
	die "no hello answer from $URL"

echo "server: bench/hello, GOMAXPROCS=1 on CPU 0; generators on CPU 1; $ROUNDS rounds of $DURATION per tool" >&2
taskset -c 1 wrk -t1 -c10 -d1s "$URL" >/dev/null # warm-up

wrk_rps() {
	taskset -c 1 wrk -t1 -c"$1" -d"$DURATION" "$URL" | awk '/^Requests\/sec:/ {print $2}'
}
hlab_rps() {
	taskset -c 1 env GOMAXPROCS=1 "$HLAB" load --connections "$1" --duration "$DURATION" --json "$URL" 2>"$work/hlab.err" |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["rps"])' ||
		die "hlab load failed: $(cat "$work/hlab.err")"
}

results="$work/results"
: >"$results"
for n in $CONNS; do
	for r in $(seq "$ROUNDS"); do
		w=$(wrk_rps "$n")
		[ -n "$w" ] || die "could not read wrk's Requests/sec"
		h=$(hlab_rps "$n")
		echo "connections=$n round $r: wrk $w req/s, hlab $h req/s" >&2
		echo "$n $w $h" >>"$results"
	done
done

python3 - "$results" "$MIN_RATIO" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    n, w, h = line.split()
    rows.setdefault(int(n), ([], []))
    rows[int(n)][0].append(float(w))
    rows[int(n)][1].append(float(h))
min_ratio = float(sys.argv[2])
failed = False
print(f"{'connections':>11}  {'wrk req/s':>10}  {'hlab req/s':>10}  {'ratio':>6}  verdict")
for n in sorted(rows):
    w, h = statistics.median(rows[n][0]), statistics.median(rows[n][1])
    ratio = h / w if w else 0.0
    ok = ratio >= min_ratio
    failed |= not ok
    print(f"{n:>11}  {w:>10.0f}  {h:>10.0f}  {ratio:>6.3f}  {'PASS' if ok else 'FAIL'}")
sys.exit(1 if failed else 0)
EOF
