#!/usr/bin/env bash
# `make demo` (interim, until the C/Python/Node workers land): a lock hand-over between two
# workers on Consul's HTTP API, against the embedded dev server unless CONSUL_HTTP_ADDR is set.
# Shows the fencing token (LockIndex/ModifyIndex), lock-delay after a crash, and a clean
# release that pays no lock-delay. Cleans up every session and key it made.
set -euo pipefail
cd "$(dirname "$0")/.."

KEY="service/baton-demo/leader"
LOCK_FLAGS=3304740253564472344   # Go api.LockFlagValue: Go's api.Lock can contend on the same key
LOCK_DELAY="2s"
T0=$(date +%s.%N)

since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }'; }
log() { printf '[%7ss] %s\n' "$(since "$T0")" "$*"; }
now() { date +%s.%N; }

SERVER_PID=""
SESSIONS=()
cleanup() {
  for s in "${SESSIONS[@]:-}"; do
    [ -n "$s" ] && curl -fsS -X PUT "$BASE/v1/session/destroy/$s" >/dev/null 2>&1 || true
  done
  [ -n "${BASE:-}" ] && curl -fsS -X DELETE "$BASE/v1/kv/$KEY" >/dev/null 2>&1 || true
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -f "${OUT:-}"
}
trap cleanup EXIT

if [ -n "${CONSUL_HTTP_ADDR:-}" ]; then
  BASE="$CONSUL_HTTP_ADDR"; case "$BASE" in http://*|https://*) ;; *) BASE="http://$BASE";; esac
  log "using the Consul at $BASE"
else
  OUT=$(mktemp)
  target/release/baton-devserver --port 0 >"$OUT" 2>/dev/null &
  SERVER_PID=$!
  for _ in $(seq 100); do grep -q '^BATON_DEVSERVER_ADDR=' "$OUT" && break; sleep 0.05; done
  BASE="http://$(sed -n 's/^BATON_DEVSERVER_ADDR=//p' "$OUT")"
  log "started baton-devserver at $BASE (CONSUL_HTTP_ADDR unset)"
fi
AUTH=()
[ -n "${CONSUL_HTTP_TOKEN:-}" ] && AUTH=(-H "X-Consul-Token: $CONSUL_HTTP_TOKEN")

api() { curl -fsS "${AUTH[@]}" "$@"; }
jfield() { sed -n "s/.*\"$1\":\\([0-9]*\\).*/\\1/p"; }

session() { api -X PUT "$BASE/v1/session/create" -d "{\"Name\":\"baton-demo $1\",\"TTL\":\"10s\",\"LockDelay\":\"$LOCK_DELAY\"}" | sed 's/.*"ID":"\([^"]*\)".*/\1/'; }
acquire() { api -X PUT "$BASE/v1/kv/$KEY?acquire=$2&flags=$LOCK_FLAGS" --data-binary "$1"; }
release() { api -X PUT "$BASE/v1/kv/$KEY?release=$2&flags=$LOCK_FLAGS" --data-binary "$1"; }
holder() { api "$BASE/v1/kv/$KEY"; }

node=$(api "$BASE/v1/agent/self" | sed -n 's/.*"NodeName":"\([^"]*\)".*/\1/p')
log "agent node: $node"

A=$(session alpha); SESSIONS+=("$A"); log "alpha: session $A (TTL 10s, lock-delay $LOCK_DELAY)"
B=$(session beta);  SESSIONS+=("$B"); log "beta:  session $B"

[ "$(acquire alpha "$A")" = true ] || { echo "alpha could not acquire $KEY" >&2; exit 1; }
entry=$(holder)
log "alpha leads: LockIndex=$(echo "$entry" | jfield LockIndex) fencing token (ModifyIndex)=$(echo "$entry" | jfield ModifyIndex)"
log "beta tries:  acquire -> $(acquire beta "$B") (held by alpha)"

# beta watches the key with a blocking query, as every waiter should (no polling).
idx=$(api -D - -o /dev/null "$BASE/v1/kv/$KEY" | tr -d '\r' | sed -n 's/^X-Consul-Index: //Ip')
WATCH=$(mktemp)
api "$BASE/v1/kv/$KEY?index=$idx&wait=30s" >"$WATCH" &
WPID=$!
log "beta parks a blocking query at index $idx"

log "alpha crashes: its session is invalidated (as a TTL or health-check failure would)"
crash=$(now)
api -X PUT "$BASE/v1/session/destroy/$A" >/dev/null
wait "$WPID"; rm -f "$WATCH"
log "beta's blocking query woke: the key has no holder"
tries=0
until [ "$(acquire beta "$B")" = true ]; do
  tries=$((tries + 1))
  [ "$tries" -gt 400 ] && { echo "beta never acquired" >&2; exit 1; }
  sleep 0.025
done
failover=$(since "$crash")
entry=$(holder)
log "beta leads after ${failover}s (budget: lock-delay $LOCK_DELAY; $tries acquire attempts were refused by it)"
log "beta: LockIndex=$(echo "$entry" | jfield LockIndex) fencing token=$(echo "$entry" | jfield ModifyIndex) (grew)"

C=$(session gamma); SESSIONS+=("$C"); log "gamma: session $C"
t=$(now)
release beta "$B" >/dev/null
log "beta resigns: explicit release (value and flags resent, as Go's api.Lock does)"
[ "$(acquire gamma "$C")" = true ] || { echo "gamma could not acquire after a clean release" >&2; exit 1; }
log "gamma leads after $(since "$t")s: a clean release pays no lock-delay"
entry=$(holder)
log "gamma: LockIndex=$(echo "$entry" | jfield LockIndex) fencing token=$(echo "$entry" | jfield ModifyIndex)"
release gamma "$C" >/dev/null
log "done; cleaning up sessions and keys"
