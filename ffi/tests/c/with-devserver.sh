#!/usr/bin/env bash
# Usage: with-devserver.sh DEVSERVER_BIN CMD...
# Starts a dev server on a free port, exports CONSUL_HTTP_ADDR, runs CMD, stops the server.
# BATON_TEST_DEVSERVER_PRETTY (set, not empty, not 0): the server indents JSON as `consul agent -dev`.
# BATON_TEST_CONSUL_VERSION=X.Y.Z: the server emulates that Consul version.
# Exports BATON_DEVSERVER_BIN (DEVSERVER_BIN, absolute) for tests that start a dev server of
# their own with other flags (test_metrics.c: --max-conns-per-client).
# BATON_TEST_CONSUL=http://host:port: no dev server; CMD runs against that Consul, with
# BATON_TEST_REAL_CONSUL=1 so tests keep to Consul's limits (TTL >= 10 s, no fault controls).
set -euo pipefail
bin=$1; shift
if [ -n "${BATON_TEST_CONSUL:-}" ]; then
    export CONSUL_HTTP_ADDR=$BATON_TEST_CONSUL BATON_TEST_REAL_CONSUL=1
    exec "$@"
fi
export BATON_DEVSERVER_BIN
BATON_DEVSERVER_BIN="$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")"
out=$(mktemp)
pretty=()
case "${BATON_TEST_DEVSERVER_PRETTY:-0}" in ""|0) ;; *) pretty=(--pretty) ;; esac
case "${BATON_TEST_CONSUL_VERSION:-current}" in ""|current) ;; *) pretty+=(--consul-version "$BATON_TEST_CONSUL_VERSION") ;; esac
"$bin" --port 0 --session-ttl-min 100ms ${pretty[@]+"${pretty[@]}"} >"$out" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$out"' EXIT
for _ in $(seq 1 200); do
    addr=$(sed -n 's/^BATON_DEVSERVER_ADDR=//p' "$out")
    [ -n "$addr" ] && break
    sleep 0.05
done
[ -n "${addr:-}" ] || { echo "dev server did not start" >&2; exit 1; }
export CONSUL_HTTP_ADDR=$addr
"$@"
