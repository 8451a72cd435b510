#!/usr/bin/env bash
# Runs the quickstarts as a new user would, from the very blocks the docs
# show (a fenced block after "<!-- quickstart: NAME -->" in README.md or a
# page under docs/), and checks what each printed. `make test` runs it; so
# does CI, on a fresh clone.
#
#   scripts/quickstarts.sh            every quickstart
#   scripts/quickstarts.sh tasks ...  some of them
#
# Each runs in a shell of its own, line by line, in the repository's root.
# A line ending in "&" starts something in the background: the script
# waits until it is ready (see ready below) before the next line, where a
# person would have read its output. Dependencies go to a state directory
# of the run's own (XDG_STATE_HOME), never a user's, and are stopped with
# "hlab deps down --purge" at the end, as are the background commands.
# Needs bin/hlab and bin/grpcurl (make build, make deps).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

work=$(mktemp -d /tmp/hlab-quickstarts.XXXXXX)
export XDG_STATE_HOME=$work/state
export PATH=$root/bin:$PATH

# expect NAME: the lines each quickstart's output must contain (extended
# regular expressions), one per line.
expect() {
	case $1 in
	databus | databus-real)
		printf '%s\n' \
			'^published 3 messages to orders$' \
			'^consumed orders/[0-9]+@[0-9]+ key=0 value="hello 0"$' \
			'^databus\.v1\.DataBus$' \
			'"stored": 1' \
			'"value": "aGk="'
		;;
	databus-secure)
		printf '%s\n' '"stored": 1' '"value": "aGk="'
		;;
	databus-consumers)
		# The payment's first delivery, then its dead letter: the
		# reason it was nacked with ("no such customer") and where
		# from; then the replay, which hands the payment over again.
		printf '%s\n' \
			'"deliveryCount": 1' \
			'"key": "databus-nack-reason"' \
			'"value": "bm8gc3VjaCBjdXN0b21lcg=="' \
			'"key": "databus-original-topic"' \
			'"topic": "payments.dlq"' \
			'^\{"replayed":"Y2hhcmdlIDQy"\}$'
		;;
	replica)
		printf '%s\n' '^--- PASS: Example' '^ok[[:space:]]+github.com/highload-lab/hlab/replica'
		;;
	tasks)
		printf '%s\n' \
			'"email":"ada@example.com"' \
			'^taskwatch: connected' \
			'^update: .*"type":"task.created".*"title":"try hlab"' \
			'^\{"tasks":\[\{"id":1,"title":"try hlab"'
		;;
	*) return 1 ;;
	esac
}

# ready LINE LOG: waits until what LINE started in the background is ready.
ready() {
	local line=$1 log=$2 url="" pattern=""
	case $line in
	*"serve databus"*) url=http://127.0.0.1:7071/healthz ;;
	*"serve tasks"*) url=http://127.0.0.1:8080/healthz ;;
	*taskwatch*) pattern='^taskwatch: connected' ;;
	*) return 0 ;;
	esac
	for _ in $(seq 1 1200); do # 2 minutes: the first start of a JVM, a first go run
		if [ -n "$url" ] && curl -fs -o /dev/null "$url"; then return 0; fi
		if [ -n "$pattern" ] && grep -Eq "$pattern" "$log"; then return 0; fi
		sleep 0.1
	done
	echo "quickstarts: \"$line\" was not ready after 2 minutes" >&2
	return 1
}

# sources: the files quickstarts are read from, the README first.
sources() {
	echo README.md
	find docs -name '*.md' | sort
}

# source_of NAME: the file that holds the quickstart's block, if any.
source_of() {
	grep -lxF -- "<!-- quickstart: $1 -->" $(sources) || true
}

# block NAME: the quickstart's commands, from the file that shows them.
block() {
	local file
	file=$(source_of "$1")
	[ -n "$file" ] || return 0
	awk -v name="$1" '
		$0 == "<!-- quickstart: " name " -->" { want = 1; next }
		want && /^```sh$/ { inside = 1; next }
		inside && /^```$/ { exit }
		inside { print }
	' "$file"
}

# run NAME: runs a quickstart and checks its output; 0 when it passed.
run() {
	local name=$1 log=$work/$1.log
	local lines
	mapfile -t lines < <(block "$name")
	if [ ${#lines[@]} -eq 0 ]; then
		echo "quickstarts: no block \"<!-- quickstart: $name -->\" in $(sources | tr '\n' ' ')" >&2
		return 1
	fi
	: >"$log"
	echo "=== quickstart $name (${#lines[@]} commands, from $(source_of "$name"))"
	# One shell runs the lines, as one person's terminal would, in a
	# process group of its own so that its background commands can be
	# stopped; it reads them from a FIFO, one at a time.
	local fifo=$work/$name.fifo status=0
	mkfifo "$fifo"
	setsid bash -euo pipefail <"$fifo" >>"$log" 2>&1 &
	local shell=$!
	exec 3>"$fifo"
	for line in "${lines[@]}"; do
		echo "\$ $line" >>"$log"
		if [[ $line == *"&" ]]; then
			printf '%s\n' "$line" >&3
			if ! ready "$line" "$log"; then
				status=1
				break
			fi
		else
			# Its input is not the FIFO, which the shell reads its lines
			# from; the shell says when it is done through a marker file.
			printf '{ %s\n} </dev/null\ntouch %q\n' "$line" "$work/$name.done" >&3
			while [ ! -e "$work/$name.done" ]; do
				if ! kill -0 "$shell" 2>/dev/null; then
					echo "quickstarts: \"$line\" failed" >>"$log"
					status=1
					break 2
				fi
				sleep 0.1
			done
			rm -f "$work/$name.done"
		fi
	done
	# What runs in the background (a watcher) may print a moment after
	# the last line: wait up to 10 s for every expected line.
	if [ $status -eq 0 ]; then
		for _ in $(seq 1 100); do
			missing=0
			while read -r want; do
				grep -Eq -- "$want" "$log" || missing=1
			done < <(expect "$name")
			[ $missing -eq 0 ] && break
			sleep 0.1
		done
	fi
	exec 3>&-
	kill -- -"$shell" 2>/dev/null || true
	wait "$shell" 2>/dev/null || true
	if [ $status -eq 0 ]; then
		while read -r want; do
			if ! grep -Eq -- "$want" "$log"; then
				echo "quickstarts: $name printed no line matching: $want" >>"$log"
				status=1
			fi
		done < <(expect "$name")
	fi
	cat "$log"
	if [ $status -eq 0 ]; then echo "--- PASS: quickstart $name"; else echo "--- FAIL: quickstart $name"; fi
	return $status
}

# stop_deps stops every dependency a quickstart starts, purging its data.
stop_deps() {
	for dep in postgres kafka kafka-real kafka-secure; do
		hlab deps down --purge "$dep" >/dev/null 2>&1 || true
	done
}

cleanup() {
	stop_deps
	rm -rf "$work"
}
trap cleanup EXIT

# Each name is shown once: two blocks of one name would leave a reader
# unsure which one runs.
twice=$(sed -n 's/^<!-- quickstart: \(.*\) -->$/\1/p' $(sources) | sort | uniq -d)
if [ -n "$twice" ]; then
	echo "quickstarts: more than one block of the quickstart(s): $twice: give each block a name of its own" >&2
	exit 1
fi
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
	mapfile -t names < <(sed -n 's/^<!-- quickstart: \(.*\) -->$/\1/p' $(sources))
fi
failed=()
for name in "${names[@]}"; do
	if ! expect "$name" >/dev/null; then
		echo "quickstarts: no expectations for \"$name\": add them to expect in $0" >&2
		failed+=("$name")
		continue
	fi
	run "$name" || failed+=("$name")
	# Each starts from no dependency running, as on a fresh machine.
	stop_deps
done
if [ ${#failed[@]} -gt 0 ]; then
	echo "quickstarts: FAILED: ${failed[*]}" >&2
	exit 1
fi
echo "quickstarts: all ${#names[@]} passed"
