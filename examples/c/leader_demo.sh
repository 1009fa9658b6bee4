#!/usr/bin/env bash
# Usage: leader_demo.sh DIR   (DIR holds the built leader_worker; needs CONSUL_HTTP_ADDR)
#
# Starts three leader_worker processes on one key, then three times: waits for a
# leader, sends it SIGTERM, and checks that it stepped down cleanly (exit 0) and
# that the next leader's fencing token is higher. Prints every worker's output.
set -euo pipefail
bin=$1
: "${CONSUL_HTTP_ADDR:?set CONSUL_HTTP_ADDR (make examples-c starts a dev server)}"
key="examples/c/leader-$$"
dir=$(mktemp -d)
declare -A pids
names=(ada grace linus)
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    for n in "${names[@]}"; do echo "---- $n"; cat "$dir/$n.log" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
fail() { echo "leader_demo: FAILED: $*" >&2; exit 1; }

for n in "${names[@]}"; do
    "$bin/leader_worker" "$n" "$key" >"$dir/$n.log" 2>&1 &
    pids[$n]=$!
done

last_token=0
for round in 1 2 3; do
    leader=""
    for _ in $(seq 1 600); do
        for n in "${!pids[@]}"; do
            if grep -q "leading with fencing token" "$dir/$n.log"; then leader=$n; break 2; fi
        done
        sleep 0.05
    done
    [ -n "$leader" ] || fail "round $round: nobody leads after 30 s"
    token=$(sed -n 's/.*leading with fencing token \([0-9]*\).*/\1/p' "$dir/$leader.log" | tail -1)
    echo "round $round: $leader leads with fencing token $token"
    [ "$token" -gt "$last_token" ] || fail "token $token is not above the previous $last_token"
    last_token=$token
    kill -TERM "${pids[$leader]}"
    status=0
    wait "${pids[$leader]}" || status=$?
    unset "pids[$leader]"
    [ "$status" -eq 0 ] || fail "$leader exited with $status after SIGTERM"
    grep -q "resigned: BATON_OK" "$dir/$leader.log" || fail "$leader did not resign"
done
echo "leader_demo: 3 leaders in turn, each stepped down on SIGTERM, tokens increasing"
