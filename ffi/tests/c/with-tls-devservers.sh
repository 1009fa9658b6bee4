#!/usr/bin/env bash
# Usage: with-tls-devservers.sh DEVSERVER_BIN CMD...
# Makes a CA and certificates with `baton-devserver tls` (Consul's file names) in a temporary
# directory, starts four dev servers, exports where they are, runs CMD, stops them:
#   BATON_TLS_DIR          the certificates: consul-agent-ca.pem, dc1-server-consul-0.pem,
#                          dc1-client-consul-0.pem (+ -key.pem), self-signed.pem, other/ (a second
#                          CA: other-agent-ca.pem), capath/ (both CAs)
#   BATON_TLS_HTTPS        https://host:port presenting dc1-server-consul-0.pem
#   BATON_TLS_MTLS         the same with verify_incoming (a client certificate is required)
#   BATON_TLS_SELF_SIGNED  https://host:port presenting self-signed.pem (CA:TRUE)
#   BATON_ACL_ADDR         host:port of a plain HTTP server with ACLs on: management token
#                          BATON_ACL_MANAGEMENT, and tokens BATON_ACL_READER (key:read on jobs/,
#                          session:write), BATON_ACL_NO_SESSION (key:write on jobs/ only) and
#                          BATON_ACL_LOCKER (key:write on jobs/, session:write)
# These always run against dev servers: a real agent's TLS and ACL setup cannot be chosen from a
# test (BATON_TEST_CONSUL is not used).
set -euo pipefail
bin=$1; shift
dir=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]+"${pids[@]}"}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$dir"
}
trap cleanup EXIT
"$bin" tls ca create -dir "$dir" >/dev/null
"$bin" tls cert create -server -dir "$dir" >/dev/null
"$bin" tls cert create -client -dir "$dir" >/dev/null
"$bin" tls self-signed create -dir "$dir" >/dev/null
mkdir "$dir/other" "$dir/capath"
"$bin" tls ca create -domain other -dir "$dir/other" >/dev/null
cp "$dir/other/other-agent-ca.pem" "$dir/capath/a-other.pem"
cp "$dir/consul-agent-ca.pem" "$dir/capath/b-consul.pem"

# start NAME ARGS...: starts a server, waits for its address lines, sets ${NAME}_OUT.
start() {
    local name=$1; shift
    local out="$dir/$name.out"
    "$bin" --port 0 --session-ttl-min 1s "$@" >"$out" 2>"$dir/$name.err" &
    pids+=($!)
    for _ in $(seq 1 200); do
        if grep -q '^BATON_DEVSERVER_ADDR=' "$out" && { [[ " $* " != *" --https-port "* ]] || grep -q '^BATON_DEVSERVER_HTTPS_ADDR=' "$out"; }; then
            return 0
        fi
        sleep 0.05
    done
    echo "dev server $name did not start:" >&2
    cat "$dir/$name.err" >&2
    exit 1
}
https_of() { echo "https://$(sed -n 's/^BATON_DEVSERVER_HTTPS_ADDR=//p' "$dir/$1.out")"; }

tls=(--https-port 0 --tls-ca "$dir/consul-agent-ca.pem")
start https "${tls[@]}" --tls-cert "$dir/dc1-server-consul-0.pem" --tls-key "$dir/dc1-server-consul-0-key.pem"
start mtls "${tls[@]}" --tls-cert "$dir/dc1-server-consul-0.pem" --tls-key "$dir/dc1-server-consul-0-key.pem" --verify-incoming
start selfsigned "${tls[@]}" --tls-cert "$dir/self-signed.pem" --tls-key "$dir/self-signed-key.pem"

export BATON_ACL_MANAGEMENT=mgmt-s3cret-c0ffee BATON_ACL_READER=reader-s3cret-c0ffee \
    BATON_ACL_NO_SESSION=nosession-s3cret-c0ffee BATON_ACL_LOCKER=locker-s3cret-c0ffee
start acl --acl-token "$BATON_ACL_MANAGEMENT" \
    --acl-token-rules "$BATON_ACL_READER="'key_prefix "jobs/" { policy = "read" } session_prefix "" { policy = "write" }' \
    --acl-token-rules "$BATON_ACL_NO_SESSION="'key_prefix "jobs/" { policy = "write" }' \
    --acl-token-rules "$BATON_ACL_LOCKER="'key_prefix "jobs/" { policy = "write" } session_prefix "" { policy = "write" }'

export BATON_TLS_DIR=$dir
BATON_TLS_HTTPS=$(https_of https)
BATON_TLS_MTLS=$(https_of mtls)
BATON_TLS_SELF_SIGNED=$(https_of selfsigned)
BATON_ACL_ADDR=$(sed -n 's/^BATON_DEVSERVER_ADDR=//p' "$dir/acl.out")
export BATON_TLS_HTTPS BATON_TLS_MTLS BATON_TLS_SELF_SIGNED BATON_ACL_ADDR
# No stray CONSUL_* setting of the caller's may change what the tests configure.
for v in $(env | sed -n 's/^\(CONSUL_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
"$@"
