#!/usr/bin/env bash
# Installs what Highload Lab needs on a Debian machine and is quick when it
# is all there: nginx (the scale experiment's load balancer), wrk (the
# side-by-side check of hlab load), PostgreSQL, and the Go modules.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
# PostgreSQL server binaries (initdb, postgres); the lab runs its own clusters.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
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
