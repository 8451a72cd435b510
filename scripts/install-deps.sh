#!/usr/bin/env bash
# Installs what Highload Lab needs on a Debian machine and is quick when it
# is all there: nginx (the scale experiment's load balancer), wrk (the
# side-by-side check of hlab load), PostgreSQL, Redis, a JDK and Maven (the
# MongoDB stand-in and the real Kafka broker, whose jars it fetches from
# Maven Central), and the Go modules.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# PostgreSQL server binaries (initdb, postgres); the lab runs its own clusters.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
# Report B's benchmark compares Redis with the in-memory replica.
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
# The MongoDB stand-in (mongo-java-server) is a Java main compiled at first
# use: it needs javac, not only java, and mvn to fetch its jars. The real
# Kafka broker runs on the same Java 17.
command -v javac >/dev/null 2>&1 || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
# The README's quickstarts (scripts/quickstarts.sh) use curl and jq.
command -v curl >/dev/null 2>&1 || missing+=(curl)
command -v jq >/dev/null 2>&1 || missing+=(jq)
# Postgres 14's server binaries (below) come as a tar.xz.
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
if [ ${#missing[@]} -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-deps: missing ${missing[*]} and no apt-get: install them with your package manager" >&2
    echo "install-deps: (the lab runs without nginx, on its built-in load balancer)" >&2
  else
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "install-deps: installing ${missing[*]} from Debian's packages" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi
go mod download
# grpcurl, pinned, into bin/: the README's databus quickstart uses it (the
# gateway serves gRPC reflection, so it needs no .proto file), and
# scripts/quickstarts.sh runs that quickstart.
grpcurl_version=v1.9.3
if ! go version -m bin/grpcurl 2>/dev/null | grep -q "mod[[:space:]]*github.com/fullstorydev/grpcurl[[:space:]]*$grpcurl_version"; then
  GOBIN="$PWD/bin" go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$grpcurl_version"
fi
# Fetch and compile the MongoDB stand-in now (about 3 MB, once), not in the
# middle of a test run; without it, the tests that need it skip.
go run ./cmd/hlab deps install mongo ||
  echo "install-deps: the MongoDB stand-in could not be prepared; the tests that need it will skip" >&2
# The real Kafka broker's jars (about 45 MB, once; under a second when
# cached): the tests run one suite against kfake and against it.
go run ./cmd/hlab deps install kafka ||
  echo "install-deps: the Kafka jars could not be fetched; the real-broker tests will fail (make test sets HLAB_REQUIRE_DEPS)" >&2
# Cassandra 5.0's jars and 4.0's (about 67 and 44 MB, once; under a
# second when cached): report A3's experiment (nosql) runs a node of each,
# 4.0 for the report's own setup, and the activities tests run a real node.
go run ./cmd/hlab deps install cassandra ||
  echo "install-deps: the Cassandra jars could not be fetched; the Cassandra tests will fail (make test sets HLAB_REQUIRE_DEPS)" >&2
# Postgres 14, report A3's line (Debian 12 has 15 only): zonky's server
# binaries from Maven Central (about 10 MB, once), unpacked into
# /usr/local/lib/hlab; the nosql experiment's rows of the report's setup
# run on it.
go run ./cmd/hlab deps install postgres14 ||
  echo "install-deps: Postgres 14 could not be installed; the nosql experiment will fail (make test sets HLAB_REQUIRE_DEPS)" >&2
# Prometheus and promtool, Debian's package (2.42; quick when present):
# deploy/grafana's tests evaluate every dashboard query through a real
# server and check and test the alert rules with promtool, and `hlab deps
# up prometheus` runs it. hlab runs its own servers on free ports: where
# systemd runs, the package's own service (on :9090) is stopped and
# disabled once installed.
go run ./cmd/hlab deps install prometheus ||
  echo "install-deps: Prometheus could not be installed; deploy/grafana's tests will fail (make test sets HLAB_REQUIRE_DEPS)" >&2
# Schemathesis, pinned with all it imports (scripts/schemathesis-requirements.txt),
# in a virtualenv of its own, bin/schemathesis, never in the system's
# Python: TestSchemathesis drives the task API with it. About 95 MB and
# 10-30 s the first time; nothing when the installed set is the pinned one.
st_venv=bin/schemathesis
if ! cmp -s scripts/schemathesis-requirements.txt "$st_venv/requirements.txt" ||
  ! "$st_venv/bin/schemathesis" --version >/dev/null 2>&1; then
  rm -rf "$st_venv"
  if python3 -m venv "$st_venv" &&
    "$st_venv/bin/pip" install -q --disable-pip-version-check -r scripts/schemathesis-requirements.txt; then
    cp scripts/schemathesis-requirements.txt "$st_venv/requirements.txt"
  else
    rm -rf "$st_venv"
    echo "install-deps: schemathesis could not be installed (it needs python3 >= 3.11 with venv: Debian's python3-venv); TestSchemathesis will fail (make test sets HLAB_REQUIRE_DEPS)" >&2
  fi
fi
