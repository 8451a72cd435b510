#!/usr/bin/env bash
# loadgen-vs-wrk.sh: is "hlab load" as strong and as cheap as the tools the
# field trusts? Both parts drive the same 1-core hello server (CPU 0,
# GOMAXPROCS=1; bench/hello, on fasthttp so that the server is not the
# limit); every generator runs on CPU 1, one core, one at a time.
#
# 1. Closed model against wrk: for each connection count, ROUNDS rounds of
#    DURATION, wrk and hlab alternating so drift on the machine hits both
#    alike. For each tool it prints the median requests/sec and the median
#    CPU per request: the user+system time of the tool's process divided by
#    the requests it made, which a busy machine disturbs far less than
#    req/s. wrk sends hlab's User-Agent header too, so that the server
#    parses the same request from both. PASS when hlab reaches MIN_RATIO
#    of wrk's req/s (at the counts in RPS_CONNS) and uses at most
#    MAX_CPU_RATIO of wrk's CPU per request (at every count).
# 2. Open model against vegeta (installed at a pinned version into bin/):
#    for each rate in RATES, OPEN_DURATION per tool. For each it prints the
#    rate achieved, the share of the intended count sent within the run,
#    p50/p99 latency and CPU per request, then vegeta's best sustained rate
#    (the highest rate of RATES at which it sent at least 99% of the
#    intended count). PASS when hlab sends at least 99% of the intended
#    count at every rate up to OPEN_MIN_RATE.
#
# Exits 1 if any check FAILs, 2 when it cannot run, 3 when none failed but
# one was INCONCLUSIVE: hlab sent under 99% while the server used 90% or
# more of its CPU, so the server, not the generator, may have been the
# limit. Every row gives the server's CPU (the share of its one core it
# used during the tool's run).
#
# Usage: bench/loadgen-vs-wrk.sh            (from anywhere in the repo)
#        QUICK=1 bench/loadgen-vs-wrk.sh    (smoke run: one round, short)
# Environment:
#   HLAB=./bin/hlab   the hlab binary          CONNS="1 10 50 100"
#   ROUNDS=3          rounds per tool          DURATION=5s    per round
#   RPS_CONNS="10 50" counts where req/s is checked
#   MIN_RATIO=0.95    hlab req/s / wrk req/s, at least
#   MAX_CPU_RATIO=1.0 hlab CPU/request / wrk CPU/request, at most
#   RATES="5000 10000 20000 50000"   open model, requests/s
#   OPEN_DURATION=10s OPEN_MIN_RATE=50000     OPEN=0 skips the open model
#   VEGETA=           a vegeta binary (default: bin/vegeta, installed with
#                     go install github.com/tsenart/vegeta/v12@v12.13.0)
#   ADDR=127.0.0.1:PORT   server address (default: a free port)
set -euo pipefail

cd "$(dirname "$0")/.."
if [ -n "${QUICK:-}" ] && [ "${QUICK}" != 0 ]; then
	: "${CONNS:=10}" "${ROUNDS:=1}" "${DURATION:=2s}" "${RATES:=5000}" "${OPEN_DURATION:=2s}"
fi
HLAB=${HLAB:-./bin/hlab}
CONNS=${CONNS:-"1 10 50 100"}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5s}
RPS_CONNS=${RPS_CONNS:-"10 50"}
MIN_RATIO=${MIN_RATIO:-0.95}
MAX_CPU_RATIO=${MAX_CPU_RATIO:-1.0}
RATES=${RATES:-"5000 10000 20000 50000"}
OPEN_DURATION=${OPEN_DURATION:-10s}
OPEN_MIN_RATE=${OPEN_MIN_RATE:-50000}
OPEN=${OPEN:-1}
VEGETA_VERSION=v12.13.0

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
if [ "$OPEN" != 0 ] && [ -z "${VEGETA:-}" ]; then
	VEGETA=bin/vegeta
	if ! [ -x "$VEGETA" ] || ! grep -q "$VEGETA_VERSION" "bin/.vegeta-version" 2>/dev/null; then
		echo "installing vegeta $VEGETA_VERSION into bin/..." >&2
		GOBIN="$PWD/bin" go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" ||
			die "could not install vegeta (go install github.com/tsenart/vegeta/v12@$VEGETA_VERSION)"
		echo "$VEGETA_VERSION" >bin/.vegeta-version
	fi
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
export SERVER_PID=$server_pid
for _ in $(seq 50); do
	kill -0 "$server_pid" 2>/dev/null || die "hello server exited: $(cat "$work/hello.log")"
	accepts "$ADDR" && break
	sleep 0.1
done
python3 -c 'import sys, urllib.request; sys.exit(urllib.request.urlopen(sys.argv[1], timeout=2).read() != b"hello\n")' "$URL" ||
	die "no hello answer from $URL"

# timed OUT CMD...: runs CMD on CPU 1 with its stdout in OUT and prints
# two figures: the user+system CPU seconds it used (its own and its
# children's), and the share of a CPU the server (SERVER_PID) used
# meanwhile, which says whether the server or the tool was the limit.
# Its stdin goes to CMD.
cat >"$work/timed.py" <<'EOF'
import os, resource, subprocess, sys, time
out, server = sys.argv[1], os.environ["SERVER_PID"]
def server_cpu():
    with open(f"/proc/{server}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
s0, t0 = server_cpu(), time.monotonic()
with open(out, "wb") as f:
    rc = subprocess.call(["taskset", "-c", "1"] + sys.argv[2:], stdout=f)
s1, t1 = server_cpu(), time.monotonic()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{ru.ru_utime + ru.ru_stime:.4f} {(s1 - s0) / (t1 - t0):.3f}")
sys.exit(rc)
EOF
timed() { python3 "$work/timed.py" "$@"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

echo "server: bench/hello, GOMAXPROCS=1 on CPU 0; generators on CPU 1; load average $(loadavg)" >&2
taskset -c 1 wrk -t1 -c10 -d1s "$URL" >/dev/null # warm-up

# --- closed model: wrk vs hlab -------------------------------------------
echo "closed model: $ROUNDS alternating rounds of $DURATION per tool at connections $CONNS" >&2
closed="$work/closed"
: >"$closed"
for n in $CONNS; do
	for r in $(seq "$ROUNDS"); do
		t=$(timed "$work/wrk.out" wrk -t1 -c"$n" -d"$DURATION" -H "User-Agent: hlab-loadgen" "$URL") || die "wrk failed: $(cat "$work/wrk.out")"
		read -r wcpu wsrv <<<"$t"
		read -r wreq wrps < <(awk '/requests in/ {n=$1} /^Requests\/sec:/ {r=$2} END {print n, r}' "$work/wrk.out")
		[ -n "$wrps" ] || die "could not read wrk's output: $(cat "$work/wrk.out")"
		t=$(GOMAXPROCS=1 timed "$work/hlab.out" "$HLAB" load --connections "$n" --duration "$DURATION" --json "$URL") ||
			die "hlab load failed: $(cat "$work/hlab.out")"
		read -r hcpu hsrv <<<"$t"
		read -r hreq hrps < <(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["requests"], d["rps"])' "$work/hlab.out")
		python3 -c 'import sys; n,r,wq,wr,wc,ws,hq,hr,hc,hs,la=sys.argv[1:]
print(f"connections={n} round {r}: wrk {float(wr):.0f} req/s {1e6*float(wc)/int(wq):.2f} us/req (server {float(ws):.2f} CPU),"
      f" hlab {float(hr):.0f} req/s {1e6*float(hc)/int(hq):.2f} us/req (server {float(hs):.2f} CPU) (load average {la})")' \
			"$n" "$r" "$wreq" "$wrps" "$wcpu" "$wsrv" "$hreq" "$hrps" "$hcpu" "$hsrv" "$(loadavg)" >&2
		echo "$n $wreq $wrps $wcpu $wsrv $hreq $hrps $hcpu $hsrv" >>"$closed"
	done
done

# --- open model: vegeta vs hlab -------------------------------------------
open_results="$work/open"
: >"$open_results"
if [ "$OPEN" != 0 ]; then
	echo "open model: $OPEN_DURATION per tool at rates $RATES req/s" >&2
	secs=$(python3 -c 'import sys,re; m=re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)",sys.argv[1]); v=float(m[1]); print(v/1000 if m[2]=="ms" else v*60 if m[2]=="m" else v)' "$OPEN_DURATION") ||
		die "OPEN_DURATION $OPEN_DURATION: give it as 10s, 500ms or 1m"
	for rate in $RATES; do
		t=$(echo "GET $URL" | GOMAXPROCS=1 timed "$work/vegeta.bin" "$VEGETA" attack -rate="$rate/s" -duration="$OPEN_DURATION") ||
			die "vegeta attack failed"
		"$VEGETA" report -type=json "$work/vegeta.bin" >"$work/vegeta.json"
		vline=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); l=d["latencies"]
print(d["requests"], d["rate"], l["50th"]/1e6, l["99th"]/1e6, d["success"])' "$work/vegeta.json")
		echo "vegeta $rate $secs $vline $t" >>"$open_results"
		t=$(GOMAXPROCS=1 timed "$work/hlab.out" "$HLAB" load --rate "$rate" --duration "$OPEN_DURATION" --json "$URL") ||
			die "hlab load failed: $(cat "$work/hlab.out")"
		hline=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); l=d["latency_ms"]
print(d["requests"], d["rps"], l["p50"], l["p99"], d["success_ratio"])' "$work/hlab.out")
		echo "hlab $rate $secs $hline $t" >>"$open_results"
		echo "rate $rate: vegeta [$vline], hlab [$hline] (requests rate p50 p99 success; load average $(loadavg))" >&2
	done
fi

python3 - "$closed" "$open_results" "$MIN_RATIO" "$MAX_CPU_RATIO" "$RPS_CONNS" "$OPEN_MIN_RATE" "$(loadavg)" <<'EOF'
import statistics, sys
closed, open_file, min_ratio, max_cpu = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
rps_conns = {int(n) for n in sys.argv[5].split()}
open_min_rate, loadavg = float(sys.argv[6]), sys.argv[7]
failed = inconclusive = False
# A server using this share of its one CPU or more may have been the limit:
# a tool that sent less against it is not judged.
server_saturated = 0.9

rows = {}
for line in open(closed):
    n, wq, wr, wc, ws, hq, hr, hc, hs = line.split()
    r = rows.setdefault(int(n), {"wrps": [], "wcpu": [], "hrps": [], "hcpu": [], "srv": []})
    r["wrps"].append(float(wr)); r["wcpu"].append(1e6 * float(wc) / int(wq))
    r["hrps"].append(float(hr)); r["hcpu"].append(1e6 * float(hc) / int(hq))
    r["srv"] += [float(ws), float(hs)]
if rows:
    print(f"closed model (medians; CPU = user+sys of the tool's process per request; load average at the end {loadavg})")
    print(f"{'connections':>11}  {'wrk req/s':>10}  {'hlab req/s':>10}  {'ratio':>6}  {'wrk us/req':>10}  {'hlab us/req':>11}  {'ratio':>6}  {'server CPU':>10}  verdict")
    for n in sorted(rows):
        r = rows[n]
        w, h = statistics.median(r["wrps"]), statistics.median(r["hrps"])
        wc, hc = statistics.median(r["wcpu"]), statistics.median(r["hcpu"])
        ratio = h / w if w else 0.0
        cratio = hc / wc if wc else float("inf")
        why = []
        if n in rps_conns and ratio < min_ratio:
            why.append(f"req/s below {min_ratio}x wrk")
        if cratio > max_cpu:
            why.append(f"CPU/request above {max_cpu}x wrk")
        failed |= bool(why)
        verdict = "FAIL: " + ", ".join(why) if why else "PASS"
        srv = f"{min(r['srv']):.2f}-{max(r['srv']):.2f}"
        print(f"{n:>11}  {w:>10.0f}  {h:>10.0f}  {ratio:>6.3f}  {wc:>10.2f}  {hc:>11.2f}  {cratio:>6.3f}  {srv:>10}  {verdict}")

opens = [line.split() for line in open(open_file)]
if opens:
    print()
    print("open model (sent = requests sent within the run / rate x duration; latency: hlab from the intended send time, vegeta from the actual send)")
    print(f"{'rate':>7}  {'tool':<6}  {'achieved/s':>10}  {'sent':>7}  {'p50 ms':>8}  {'p99 ms':>8}  {'success':>7}  {'us/req':>7}  {'server CPU':>10}  verdict")
    best = None
    rates = sorted({float(o[1]) for o in opens})
    for rate in rates:
        for tool, _, secs, req, ach, p50, p99, ok, cpu, srv in (o for o in opens if float(o[1]) == rate):
            sent = int(req) / (rate * float(secs))
            verdict = ""
            if tool == "hlab" and rate <= open_min_rate:
                if sent >= 0.99:
                    verdict = "PASS"
                elif float(srv) >= server_saturated:
                    inconclusive = True
                    verdict = "INCONCLUSIVE: sent under 99%, but the server was saturated"
                else:
                    failed = True
                    verdict = "FAIL: sent under 99% of the intended count"
            if tool == "vegeta" and sent >= 0.99:
                best = rate
            us = 1e6 * float(cpu) / int(req) if int(req) else float("nan")
            print(f"{rate:>7.0f}  {tool:<6}  {float(ach):>10.0f}  {100*sent:>6.1f}%  {float(p50):>8.3f}  {float(p99):>8.3f}  {100*float(ok):>6.1f}%  {us:>7.2f}  {float(srv):>10.2f}  {verdict}")
    if best is None:
        print(f"vegeta's best sustained rate on one core: below {rates[0]:.0f} req/s (it sent under 99% at every rate tried)")
    elif best == rates[-1]:
        print(f"vegeta's best sustained rate on one core: at least {best:.0f} req/s (the highest tried)")
    else:
        print(f"vegeta's best sustained rate on one core: {best:.0f} req/s of those tried (99% of the intended count sent)")
sys.exit(1 if failed else 3 if inconclusive else 0)
EOF
