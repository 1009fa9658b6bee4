#!/usr/bin/env python3
"""`make bench-bindings`: what each binding costs on top of the Rust core, and the core on top
of the wire, at one or more server latencies.

One dev server in its own process (serving plain HTTP, HTTPS and a unix socket: see the
transports below); against it, a worker per language (bench/bindings/worker.*:
Rust, C over libbaton, Python sync, Python `baton.aio`, Node) and the floor client (the Rust
worker's `floor` mode: `PUT /v1/kv/KEY?acquire=S` then `PUT ...?release=S` on one keep-alive
connection, no JSON, no checks: what the wire allows) run

* uncontended acquire+release cycles on a key of their own: cycles/s and p50/p99 of a cycle,
  after warm-up cycles (the session exists, the connection is open, and V8 has compiled the
  Node path): 300, and 2,500 for the Node workers, whose JIT goes on compiling the lock path
  with TurboFan until about the 2,100th cycle, on a thread of the worker's process (in its CPU
  time, and competing for one of the two cores; a service pays that once, not per operation).
  ROUNDS rounds, each language once per round in a rotating order (a slow moment of a shared
  machine then hits every language alike); the figures are the medians over the rounds.
  Beside each: the worker's user+sys CPU time per cycle (every thread of the process: no
  speed bought with a busy core goes unseen), the dev server's CPU time per cycle (every
  thread of its process, over the whole run: warm-up included), the requests per cycle the dev
  server counted
  (every request of the run, session and warm-up included, over every cycle), and the range
  of the 1-minute load average while it ran;
* contended hand-off: two holders (two clients) alternate on one key; the latency from the
  holder's release() call to the waiter's acquire() returning, p50/p99;
* Node event-loop lag and Python asyncio loop lag (p99 of how late a 10 ms timer fires) while
  1,000 acquires on 1,000 keys are pending, with the worker's CPU use meanwhile.

Two more floor clients run in each round: the same two raw PUTs driven by an event loop instead
of a blocking thread (floor-node: a net.Socket in Node; floor-asyncio: an asyncio Protocol), no
baton. `ratio floor-node/floor` is what the loop itself costs over the wire, and `ratio
node/floor-node` what baton costs over the loop, to set beside `ratio rust/floor` (the same for
asyncio): a binding whose outcome crosses threads pays the hand-off here, and a binding whose loop
did its own I/O would be bounded by the loop floor.

A third, floor-txn (the Rust worker's `floor-txn` mode), sends the same raw way the requests
baton sends for a cycle on Consul 1.6.2 and later (a check-index + lock txn, an unlock txn):
`ratio rust/floor` is then split into `ratio floor-txn/floor` (what baton's requests cost the
server over `?acquire=`/`?release=`: on loopback at 0 ms, where the server's own time is most of
a cycle, this is most of the gap) and `ratio rust/floor-txn` (what baton's client side costs).

Every client runs over each transport of --transports (default all three, same dev server, same
rounds): plain HTTP over TCP; HTTPS, the dev server's second listener (`--https-port 0` with a
certificate for 127.0.0.1 that `baton-devserver tls` makes for the run, signed by a CA of its
own), each worker configured as an application is: an `https://` address and `CONSUL_CACERT`
naming the CA file (the core reads it from the environment; the C worker passes it as
`ca_file`, since `baton_client_new` reads no environment); and a unix socket, the dev server's
`--addr unix:///PATH` beside its TCP `--addr`, each worker given `unix:///PATH`. The floors
speak each transport themselves: over HTTPS the floor is the TLS floor (the same two raw PUTs
through a rustls client connection with the `ring` provider, as ureq gives baton's connections;
trusting the same CA file), floor-txn the same with its txn requests, floor-asyncio and
floor-node their loop's own TLS (OpenSSL); over unix the same bytes on a unix socket. Rows are
named `<client>` over plain HTTP, `<client>/https` and `<client>/unix` (`floor/https` is the
TLS floor). Each language's transports run back to back within a round (their order rotating
too), so the `https/http` and `unix/http` of one client compare neighbours in time. Any
`CONSUL_*` variable of the caller's shell is removed from the workers' environment. The dev
server is asked one request on every listener before anything is measured: a transport it (or
a worker) cannot use fails the run, never skips it.

Then `ratio <lang>/rust X.XX` lines, and `ratio rust/floor`: the cycles/s of the second divided
by the first's (cost per cycle), taken in each round (languages of one round run back to back,
under the same load) and the median over the rounds printed (a load spike on the shared machine
then costs one round, not the figure). Every such ratio is printed per transport, each row
against its twin over the same transport: `ratio rust/floor over https` is Rust over HTTPS
against the TLS floor (issue 45's `rust-https/floor-tls`), `ratio python/rust over https`
Python over HTTPS against Rust over HTTPS. Then, per client, `ratio <client> https/http` and
`ratio <client> unix/http`: the client's cost per cycle over that transport against its own over
plain HTTP (above 1.00: slower). `ratio floor https/http` is what TLS costs the wire itself (the
TLS floor against the floor); a client whose `https/http` is no higher pays nothing for TLS
beyond what the floor does (issue 45's bar: over HTTPS, `rust/floor` <= 1.15 and every
`<binding>/rust` <= 1.10, as over plain HTTP; `unix/http` <= 1.00, a unix socket at least as
fast as TCP).

--latency-ms 0,0.3,1 repeats all of it at each server latency, and ends with a summary: every ratio
on one line, a column per latency. Beyond 0, every worker reaches the dev server through
bench-bindings-latency (bench/bindings/latency.rs), a proxy that holds each request chunk for that
long (the dev server's own latency fault sleeps on a millisecond timer: asked for 0.3 ms it adds
1.5; --latency-via devserver uses it anyway). One proxy per transport: plain HTTP and HTTPS each
through a TCP proxy in front of their listener (the proxy forwards the TLS bytes untouched: the TLS
session is the worker's with the dev server, and the certificate names 127.0.0.1, the address of
both), the unix socket through a proxy that listens on a unix socket of its own and forwards to the
dev server's, so every transport pays the same added latency and the same proxy hop. The loop-lag
runs use the dev server's fault, over plain HTTP only (a thousand connections through the proxy
would measure the proxy; how late a timer fires does not depend on the transport); the hand-offs
run over every transport. The issues' targets (every `ratio <binding>/rust` <= 1.10 and `ratio
rust/floor` <= 1.15 at 0, 0.3 and 1 ms, over plain HTTP and over HTTPS; `unix/http` <= 1.00; loop
lag p99 < 1 ms) are reported, never enforced: this is a benchmark. It fails only when a worker
fails, or the dev server cannot serve a transport asked for.

With 2 CPUs or more, the dev server (and the latency proxies) run on the first CPU and every
worker on the others (see `Pin`; --no-pin leaves them to the scheduler): at 0 ms on a VM, where
a wake-up across CPUs costs tens of microseconds, unpinned figures depend on where the
scheduler put each process in each round (the floor client ran at 45,000 cycles/s beside the
server and 6,000 across, so `ratio rust/floor` read 7.04 in one unpinned run). Pinned, every
client pays the same hop, as a service does whose agent runs on another core.

--transports picks the transports (e.g. `--transports http` for the plain-HTTP bench alone,
whose output is then as before transports were added; every transport adds a row per client
and round and a hand-off per binding: the full sweep, `--latency-ms 0,0.3,1 --rounds 5`, ran in
8 minutes over all three on the shared 2-core VM, builds aside).

Builds nothing: `make bench-bindings` builds the dev server, the Rust and C workers, the latency
proxy, the wheel and the Node addon first. Stdlib only.
"""

import argparse
import datetime
import json
import os
import platform
import queue
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "bindings")
LANGS = ("floor", "floor-txn", "rust", "c", "python", "python-aio", "node", "floor-asyncio",
         "floor-node")
# The floor clients: no baton, only the wire (floor: blocking, in Rust; floor-txn: the same, with
# the txn requests baton itself sends), or the wire driven by an event loop (floor-node: a
# net.Socket; floor-asyncio: an asyncio Protocol).
FLOORS = ("floor", "floor-txn", "floor-asyncio", "floor-node")
# How the clients reach the dev server (--transports): plain HTTP over TCP, HTTPS (an https://
# address and CONSUL_CACERT; the floors speak TLS themselves) and a unix socket (unix:///PATH).
TRANSPORTS = ("http", "https", "unix")
# Variants run only when named in --langs, to see whether spinning still pays: the asyncio and
# Node workers with their event loop's polling switched off (-nospin: BATON_AIO_SPIN=0,
# BATON_NODE_SPIN=0), and with no spinning anywhere (-park: also BATON_POOL_BIND=0, the baton
# thread that delivered an outcome parks at once instead of staying bound to the loop's turn).
VARIANTS = {"python-aio-nospin": ("python-aio", {"BATON_AIO_SPIN": "0"}),
            "python-aio-park": ("python-aio", {"BATON_AIO_SPIN": "0", "BATON_POOL_BIND": "0"}),
            "node-nospin": ("node", {"BATON_NODE_SPIN": "0"}),
            "node-park": ("node", {"BATON_NODE_SPIN": "0", "BATON_POOL_BIND": "0"})}
# Warm-up cycles of every worker before it measures (see the module docs), given to the worker
# as BENCH_WARM. Node's workers warm up longer: V8 goes on compiling the lock path with TurboFan
# (on a thread of the worker's process, so in its CPU time) until about the 2,100th cycle
# (`node --trace-opt`, 2026-11-30: `main` at ~900 took 18 ms, `cancellable` at ~800 6 ms,
# `settle` at ~1,800); with 300 that compiling fell into the 500 measured cycles, some 20 us per
# cycle of a cost a service pays once.
WARM = 300
WARM_BY_LANG = {"node": 2500, "floor-node": 2500}


def warm_of(lang):
    """The warm-up cycles of `lang`'s worker (a variant's, its base language's)."""
    base = VARIANTS[lang][0] if lang in VARIANTS else lang
    return WARM_BY_LANG.get(base, WARM)


def row_name(lang, transport):
    """How a client over a transport is named in the output: `rust` over plain HTTP,
    `rust/https`, `rust/unix` (so `floor/https` is the TLS floor)."""
    return lang if transport == "http" else f"{lang}/{transport}"


def worker_env(transport, ca):
    """A worker's environment: this process's without any `CONSUL_*` variable of the caller's
    shell (the bench alone configures the clients), plus `CONSUL_CACERT` over HTTPS, which
    baton's clients read as an application's do (the C worker hands it to `ca_file`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    if transport == "https":
        env["CONSUL_CACERT"] = ca
    return env


def worker(lang, transport, addr, mode, n, key, out_dir, python, ca):
    env = worker_env(transport, ca)
    base = lang
    if lang in VARIANTS:
        base, extra = VARIANTS[lang]
        env.update(extra)
    env["BENCH_WARM"] = str(warm_of(lang))
    return worker_as(base, row_name(lang, transport), env, addr, mode, n, key, out_dir, python)


def worker_argv(lang, mode, out_dir, python):
    """`lang`'s worker (a base language, not a variant) and the worker's own name for `mode`
    (`aio-cycles`, a floor's mode): it runs as `argv + [ADDR, mode, N, KEY]`."""
    argv = {
        "floor": [os.path.join(ROOT, "target", "release", "bench-bindings-rust")],
        "floor-txn": [os.path.join(ROOT, "target", "release", "bench-bindings-rust")],
        "rust": [os.path.join(ROOT, "target", "release", "bench-bindings-rust")],
        "c": [os.path.join(out_dir, "worker-c")],
        "python": [python, os.path.join(HERE, "worker.py")],
        "python-aio": [python, os.path.join(HERE, "worker.py")],
        "node": ["node", os.path.join(HERE, "worker.js")],
        "floor-asyncio": [python, os.path.join(HERE, "worker.py")],
        "floor-node": ["node", os.path.join(HERE, "worker.js")],
    }[lang]
    if lang == "python-aio":
        mode = f"aio-{mode}"
    if lang in FLOORS:
        mode = {"floor-asyncio": "aio-floor", "floor-txn": "floor-txn"}.get(lang, "floor")
    return argv, mode


def worker_as(lang, name, env, addr, mode, n, key, out_dir, python):
    argv, mode = worker_argv(lang, mode, out_dir, python)
    p = subprocess.run(argv + [addr, mode, str(n), key], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=env, preexec_fn=PIN.worker)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        sys.exit(f"bench-bindings: the {name} worker ({mode}, {addr}) failed (exit "
                 f"{p.returncode}):\n{p.stdout}{p.stderr}")
    return json.loads(lines[-1][len("RESULT "):])


class Pin:
    """The dev server and the latency proxy on the first CPU, every worker on the others (each
    process's threads inherit its set); the default with 2 CPUs or more (--no-pin: off).
    Unpinned, the scheduler puts a worker beside the
    server on one CPU in some rounds and across two in others, and on a VM the two differ
    several-fold at 0 ms (a wake-up across CPUs costs tens of microseconds), so a ratio taken
    in one round can compare two placements; pinned, every client pays the same hop."""

    def __init__(self):
        self.on = False

    def enable(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            sys.exit("bench-bindings: pinning needs at least 2 CPUs")
        self.on, self.server_cpus, self.worker_cpus = True, {cpus[0]}, set(cpus[1:])

    def server(self):
        if self.on:
            os.sched_setaffinity(0, self.server_cpus)

    def worker(self):
        if self.on:
            os.sched_setaffinity(0, self.worker_cpus)

    def describe(self):
        if not self.on:
            return "unpinned"
        return (f"pinned: server on CPU {','.join(map(str, sorted(self.server_cpus)))}, "
                f"workers on {','.join(map(str, sorted(self.worker_cpus)))}")


PIN = Pin()


def server_cpu_secs(pid):
    """CPU time of every thread of process `pid` so far, in seconds (Linux: the scheduler's
    per-thread runtime in nanoseconds, far finer than the clock ticks of /proc/PID/stat; a
    thread that ended takes its time with it). None off Linux."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
    except OSError:
        return None
    return total / 1e9


def machine():
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def ms_(us):
    return f"{us / 1000:.3f} ms"


def get_json(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


def requests_total(server):
    """How many /v1/ requests the dev server has answered so far."""
    return get_json(f"http://{server}/_devserver/requests")["total"]


def load():
    """The 1-, 5- and 15-minute load averages, as printed beside every figure."""
    return "load %.2f %.2f %.2f" % os.getloadavg()


def fail(message, log=None):
    """Ends the run with `message` (and the dev server's log, when there is one)."""
    if log is not None:
        log.flush()
        log.seek(0)
        text = log.read().strip()
        if text:
            message += "\n--- the dev server's log ---\n" + text[-4000:]
    sys.exit("bench-bindings: " + message)


class DevServer:
    """The one dev server of the run, in its own process, listening on every transport asked
    for: plain HTTP on a free TCP port (always: the request counts and the faults go there),
    HTTPS on another (`--https-port 0`, a certificate `baton-devserver tls` made for this run,
    signed by its own CA: `self.ca`, what the workers get as `CONSUL_CACERT`) and a unix socket
    (`--addr unix:///PATH` beside `--addr 127.0.0.1:0`). Every listener is checked with one
    request before anything is measured, so a transport the server cannot serve fails the run
    at once."""

    def __init__(self, args, transports, tmp):
        self.http, self.https, self.unix, self.ca = None, None, None, None
        argv = [args.devserver, "--max-conns-per-client", "0", "--exit-on-stdin-eof"]
        if "unix" in transports:
            self.unix = os.path.join(tmp, "devserver.sock")
            argv += ["--addr", "127.0.0.1:0", "--addr", f"unix://{self.unix}"]
        else:
            argv += ["--port", "0"]
        if "https" in transports:
            self.ca, cert, key = self.certificates(args.devserver, tmp)
            argv += ["--https-port", "0", "--tls-cert", cert, "--tls-key", key]
        self.log = open(os.path.join(tmp, "devserver.log"), "w+")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, preexec_fn=PIN.server)
        self.pid = self.proc.pid
        lines = queue.Queue()

        def read_stdout():
            # Every line the server prints (its addresses, then nothing); None at its end.
            for line in self.proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read_stdout, name="devserver-stdout", daemon=True).start()
        unix_line = False
        deadline = time.monotonic() + 30
        while self.http is None or ("https" in transports and self.https is None):
            try:
                line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                self.die(f"the dev server ({' '.join(argv)}) did not print its addresses "
                         f"(exit {self.proc.poll()})" + self.unix_hint())
            key, _, value = line.strip().partition("=")
            if value.startswith("unix://"):
                unix_line = True
            elif key == "BATON_DEVSERVER_ADDR":
                self.http = value.replace("http://", "")
            elif key == "BATON_DEVSERVER_HTTPS_ADDR":
                self.https = value.replace("https://", "")
        if self.unix is not None:
            # The socket file exists once the server listens on it (whatever it prints for it:
            # BATON_DEVSERVER_UNIX_ADDR=unix:///PATH, after the lines above).
            deadline = time.monotonic() + 5
            while not unix_line and not os.path.exists(self.unix):
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.die(f"the dev server ({' '.join(argv)}) is not listening on "
                             f"unix://{self.unix}" + self.unix_hint())
                time.sleep(0.01)
        self.check(transports)

    def die(self, message):
        """Stops the server and ends the run with `message` and the server's log."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        fail(message, self.log)

    @staticmethod
    def certificates(devserver, tmp):
        """A CA and a server certificate for 127.0.0.1 (`baton-devserver tls ...`, as `consul
        tls ca create` / `consul tls cert create -server` make them): (CA, cert, key) files."""
        def saved(argv):
            p = subprocess.run([devserver, "tls"] + argv + ["-dir", tmp], capture_output=True,
                               text=True, timeout=60)
            if p.returncode != 0:
                fail(f"baton-devserver tls {' '.join(argv)} failed (exit {p.returncode}):\n"
                     f"{p.stdout}{p.stderr}")
            return [l.split("==> Saved ", 1)[1].strip() for l in p.stdout.splitlines()
                    if l.startswith("==> Saved ")]
        ca = [f for f in saved(["ca", "create"]) if not f.endswith("-key.pem")]
        leaf = saved(["cert", "create", "-server"])
        key = [f for f in leaf if f.endswith("-key.pem")]
        cert = [f for f in leaf if not f.endswith("-key.pem")]
        if len(ca) != 1 or len(cert) != 1 or len(key) != 1:
            fail(f"unexpected files from baton-devserver tls: {ca} {leaf}")
        return ca[0], cert[0], key[0]

    def unix_hint(self):
        if self.unix is None:
            return ""
        return ("\n(the unix transport needs a dev server that listens on `--addr unix:///PATH` "
                "beside a TCP --addr, and clients that take unix:// addresses: issue 45. "
                "--transports http,https leaves it out.)")

    def check(self, transports):
        """One GET /v1/status/leader on every listener (over HTTPS, verified with the CA)."""
        get = "GET /v1/status/leader HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        for t in transports:
            try:
                if t == "unix":
                    with socket.socket(socket.AF_UNIX) as so:
                        so.settimeout(10)
                        so.connect(self.unix)
                        so.sendall(get.encode())
                        answer = so.recv(4096)
                    if not answer.startswith(b"HTTP/1.1 200"):
                        raise OSError(f"answered {answer[:200]!r}")
                else:
                    base, ctx = (f"http://{self.http}", None) if t == "http" else (
                        f"https://{self.https}", ssl.create_default_context(cafile=self.ca))
                    with urllib.request.urlopen(f"{base}/v1/status/leader", timeout=10,
                                                context=ctx) as r:
                        r.read()
            except OSError as e:
                where = {"http": self.http, "https": f"https://{self.https}",
                         "unix": f"unix://{self.unix}"}[t]
                self.die(f"the dev server does not answer over {t} at {where}: {e}"
                         + (self.unix_hint() if t == "unix" else ""))

    def upstreams(self, transports):
        """Where each transport reaches the server: {transport: address for the latency
        proxy}."""
        return {t: {"http": self.http, "https": self.https, "unix": f"unix://{self.unix}"}[t]
                for t in transports}

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        finally:
            self.log.close()


class Latency:
    """Where the clients of one latency step connect, per transport: the dev server itself
    (0 ms), or a bench-bindings-latency proxy in front of each of its listeners (plain HTTP
    and HTTPS through a TCP proxy, which forwards the TLS bytes untouched; the unix socket
    through a proxy that listens on a unix socket of its own), or the dev server with its own
    latency fault (--latency-via devserver; see latency.rs for why that is not the default)."""

    def __init__(self, dev, transports, ms, via, proxy_bin, tmp):
        self.dev, self.ms, self.via, self.procs = dev, ms, via, []
        self.addr = {}
        for t, upstream in dev.upstreams(transports).items():
            a = upstream
            if ms > 0 and via == "proxy":
                listen = []
                if t == "unix":  # the proxy's own socket, beside the dev server's
                    listen = [f"unix://{os.path.join(tmp, f'latency-{ms:g}ms.sock')}"]
                proc = subprocess.Popen([proxy_bin, upstream, str(round(ms * 1000))] + listen,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        preexec_fn=PIN.server)
                self.procs.append(proc)
                first = proc.stdout.readline().strip()
                if not first.startswith("BENCH_LATENCY_ADDR="):
                    sys.exit(f"bench-bindings: unexpected first line from the latency proxy "
                             f"({t}): {first!r}")
                a = first.split("=", 1)[1]
            self.addr[t] = f"https://{a}" if t == "https" else a
        if ms > 0 and via != "proxy":
            self.fault(ms)

    def fault(self, ms):
        get_json(f"http://{self.dev.http}/_devserver/latency?d={round(ms * 1000)}us", "PUT")

    def close(self):
        for proc in self.procs:
            proc.stdin.close()  # the proxy ends and joins its threads
            proc.wait(timeout=30)
        if self.ms > 0 and not self.procs:
            self.fault(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devserver", default=os.path.join(ROOT, "target", "release", "baton-devserver"))
    ap.add_argument("--python", default=os.path.join(ROOT, ".venv", "bin", "python"))
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "bench-bindings"),
                    help="where the C worker was built")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cycles", type=int, default=500, help="cycles per language and round")
    ap.add_argument("--handoffs", type=int, default=50)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--transports", default=",".join(TRANSPORTS),
                    help="how every client reaches the dev server, comma-separated: http, https "
                         "(TLS; the floor is then the TLS floor), unix (a unix socket); "
                         "default: all three, in the same rounds")
    ap.add_argument("--latency-ms", default="0",
                    help="server latencies to run at, in ms, comma-separated (e.g. 0,0.3,1)")
    ap.add_argument("--latency-via", choices=("proxy", "devserver"), default="proxy",
                    help="how latency is added: the bench's precise proxy (default) or the dev "
                         "server's own fault (millisecond timer; see latency.rs)")
    ap.add_argument("--no-handoff", action="store_true", help="skip the contended hand-offs")
    ap.add_argument("--no-pin", action="store_true",
                    help="leave every process where the scheduler puts it (by default, with 2 "
                         "CPUs or more, the dev server and the latency proxy run on the first "
                         "and the workers on the others: see Pin)")
    args = ap.parse_args()
    if not args.no_pin and len(os.sched_getaffinity(0)) >= 2:
        PIN.enable()
    langs = [l for l in args.langs.split(",") if l]
    for l in langs:
        if l not in LANGS and l not in VARIANTS:
            sys.exit(f"unknown language {l!r} (known: {', '.join(LANGS + tuple(VARIANTS))})")
    if "floor" not in langs:
        langs.insert(0, "floor")
    asked = [t for t in args.transports.split(",") if t]
    for t in asked:
        if t not in TRANSPORTS:
            sys.exit(f"unknown transport {t!r} (known: {', '.join(TRANSPORTS)})")
    transports = [t for t in TRANSPORTS if t in asked]
    if not transports:
        sys.exit("--transports: name at least one of " + ", ".join(TRANSPORTS))
    latencies = [float(x) for x in args.latency_ms.split(",") if x.strip()]
    proxy_bin = os.path.join(ROOT, "target", "release", "bench-bindings-latency")

    tmp = tempfile.mkdtemp(prefix="bench-bindings-")
    dev = None
    try:
        dev = DevServer(args, transports, tmp)
        args.server_pid = dev.pid
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        where = ", ".join({"http": dev.http, "https": f"https://{dev.https}",
                           "unix": f"unix://{dev.unix}"}[t] for t in transports)
        print(f"bench-bindings: dev server (own process) at {where}; {machine()}; {now}; "
              f"{PIN.describe()}")
        print(f"uncontended acquire+release on one key, one thread: {args.rounds} rounds x "
              f"{args.cycles} cycles per language and latency (medians over the rounds); "
              f"floor = two raw PUTs (?acquire=, ?release=) on one keep-alive connection")
        if transports != ["http"]:
            print(f"transports, every client over each in the same rounds: {', '.join(transports)}"
                  + ("; over https the workers get an https:// address and CONSUL_CACERT, and "
                     "floor/https is the TLS floor (the same PUTs through rustls, ring provider)"
                     if "https" in transports else "")
                  + ("; over unix, a unix:/// address (floor/unix: the PUTs on a unix socket)"
                     if "unix" in transports else ""))
        summary = {}  # ratio label -> {latency: value}, in the order first printed
        for ms in latencies:
            for label, value in step(args, dev, transports, ms, langs, proxy_bin, tmp):
                summary.setdefault(label, {})[ms] = value
        if len(latencies) > 1:
            # One line per ratio, one column per latency.
            width = max(len(label) for label in summary) + 6
            print("summary (cost per cycle, median over the rounds), at each latency:")
            print(f"  {'':<{width}}" + "".join(f"{f'{ms:g} ms':>9}" for ms in latencies))
            for label, at in summary.items():
                print(f"  {'ratio ' + label:<{width}}"
                      + "".join(f"{at[ms]:>9.2f}" if ms in at else f"{'-':>9}" for ms in latencies))
    finally:
        if dev is not None:
            dev.close()
        shutil.rmtree(tmp, ignore_errors=True)


def step(args, dev, transports, ms, langs, proxy_bin, tmp):
    """One latency: cycles, hand-offs, ratios, loop lag. Returns the ratios, (label, value)."""
    lat = Latency(dev, transports, ms, args.latency_via, proxy_bin, tmp)
    tag = f"latency {ms:g} ms"
    try:
        via = {"proxy": "latency proxy", "devserver": "dev server latency fault"}[args.latency_via]
        print(f"== {tag}" + (f" (added by the {via})" if ms > 0 else " (none added)")
              + f"; {load()}")
        run = lambda lang, t, mode, n, key: worker(lang, t, lat.addr[t], mode, n, key, args.out,
                                                   args.python, dev.ca)
        rows = [(lang, t) for lang in langs for t in transports]
        width = max(17, max(len(row_name(*row)) for row in rows) + 1)
        rounds = {row: [] for row in rows}
        for r in range(args.rounds):
            # Each language once per round, in a rotating order, with its transports back to
            # back (their order rotating too): `https/http` compares neighbours in time.
            lang_order = langs[r % len(langs):] + langs[:r % len(langs)]
            t_order = transports[r % len(transports):] + transports[:r % len(transports)]
            for lang in lang_order:
                for t in t_order:
                    before = requests_total(dev.http)
                    server_before = server_cpu_secs(args.server_pid)
                    key = f"bench/bindings/{lang}/{ms:g}" if t == "http" else \
                        f"bench/bindings/{lang}-{t}/{ms:g}"
                    x = run(lang, t, "cycles", args.cycles, key)
                    server_after = server_cpu_secs(args.server_pid)
                    # Every request of the run (session, warm-up, close included) per cycle.
                    x["requests"] = requests_total(dev.http) - before
                    if server_before is not None and server_after is not None:
                        x["server_cpu_secs"] = server_after - server_before
                    x["load1"] = os.getloadavg()[0]
                    rounds[(lang, t)].append(x)
        rate = {}
        for t in transports:
            if len(transports) > 1:
                print(f" over {t}: {lat.addr[t]}"
                      + (f", CONSUL_CACERT={dev.ca}" if t == "https" else "")
                      + (f" (the latency proxy's; the server's: "
                         f"{dev.upstreams([t])[t]})" if lat.procs else ""))
            for lang in langs:
                row = (lang, t)
                rs = rounds[row]
                rate[row] = statistics.median(x["cycles"] / x["secs"] for x in rs)
                p50 = statistics.median(x["p50_us"] for x in rs)
                p99 = statistics.median(x["p99_us"] for x in rs)
                cpu = statistics.median(x["cpu_secs"] / x["cycles"] for x in rs) if "cpu_secs" in rs[0] else None
                req = statistics.median(x["requests"] / (x["cycles"] + warm_of(lang)) for x in rs)
                each = " ".join(f"{x['cycles'] / x['secs']:.0f}" for x in rs)
                cpu_text = f"cpu {cpu * 1e6:5.0f} us/cycle" if cpu is not None else "cpu     n/a      "
                # The server's CPU over every cycle of the run, warm-up included (as req/cycle).
                server = (statistics.median(x["server_cpu_secs"] / (x["cycles"] + warm_of(lang))
                                            for x in rs)
                          if "server_cpu_secs" in rs[0] else None)
                server_text = f"server {server * 1e6:4.0f} us/cycle" if server is not None else ""
                print(f"  {row_name(*row):<{width}} {rate[row]:>7.0f} cycles/s   p50 {ms_(p50)}   "
                      f"p99 {ms_(p99)}   {cpu_text}   {server_text}   {req:.2f} req/cycle   "
                      f"(rounds: {each}; load1 {min(x['load1'] for x in rs):.2f}-"
                      f"{max(x['load1'] for x in rs):.2f})")

        if not args.no_handoff:
            print(f"contended hand-off, two holders alternating on one key ({args.handoffs} hand-offs: "
                  "holder's release() called -> waiter's acquire() returned)")
            for t in transports:
                for lang in langs:
                    if lang in FLOORS:
                        continue
                    h = run(lang, t, "handoff", args.handoffs,
                            f"bench/bindings/handoff-{lang}-{t}/{ms:g}")
                    print(f"  {row_name(lang, t):<{width}} p50 {ms_(h['p50_us'])}   "
                          f"p99 {ms_(h['p99_us'])}")

        lines = []

        def ratio(a, b, label):
            # Cost per cycle of row a over row b, taken in each round (the rows of one round
            # run close together, under the same load), the median over the rounds.
            per_round = [(y["cycles"] / y["secs"]) / (x["cycles"] / x["secs"])
                         for x, y in zip(rounds[a], rounds[b])]
            value = statistics.median(per_round)
            print(f"ratio {label} {value:.2f}   ({tag})")
            lines.append((label, value))

        for t in transports:
            # The ratios of one transport: every row against its twin over the same transport
            # (over https, rust/floor is Rust over HTTPS against the TLS floor).
            on = "" if t == "http" else f" over {t}"
            within = lambda a, b: ratio((a, t), (b, t), f"{a}/{b}{on}")
            if "rust" in langs:
                within("rust", "floor")
                # Of which: baton's requests over the floor's (what the server spends on a txn),
                # and baton's client side over the same requests sent raw.
                if "floor-txn" in langs:
                    within("floor-txn", "floor")
                    within("rust", "floor-txn")
                for lang in ("python", "python-aio", "python-aio-nospin", "python-aio-park", "node",
                             "node-nospin", "node-park", "c"):
                    if lang in langs:
                        within(lang, "rust")
            # The loops' own floors: what an event loop doing the I/O itself costs over the wire,
            # and what baton costs over that (set beside rust/floor).
            for loop_floor, binding in (("floor-asyncio", "python-aio"), ("floor-node", "node")):
                if loop_floor in langs:
                    within(loop_floor, "floor")
                    if binding in langs:
                        within(binding, loop_floor)
        # What each transport costs each client against plain HTTP (the floor's: what TLS or
        # the socket costs the wire itself; a client's above the floor's is its own overhead).
        if "http" in transports:
            for t in transports:
                if t == "http":
                    continue
                for lang in langs:
                    ratio((lang, t), (lang, "http"), f"{lang} {t}/http")
        for t in transports:
            per_cycle = 1e6 / rate[("floor", t)]
            print(f"{row_name('floor', t)}: {per_cycle:.0f} us per cycle, {per_cycle / 2:.0f} us "
                  f"per request ({load()})")

        # Loop lag through the dev server's own fault (a thousand connections through the
        # proxy would measure the proxy), over plain HTTP: how late timers fire is what counts.
        if ms > 0 and lat.procs:
            lat.fault(ms)
        try:
            if "node" in langs:
                lg = worker("node", "http", dev.http, "lag", args.pending,
                            f"bench/bindings/lag-node/{ms:g}", args.out, args.python, dev.ca)
                print(f"node event-loop lag with {lg['pending']} pending acquires on {lg['pending']} keys: "
                      f"p99 {lg['p99_ms']:.2f} ms (p50 {lg['p50_ms']:.2f} ms, max {lg['max_ms']:.2f} ms; "
                      f"cpu {100 * lg['cpu_secs'] / lg['secs']:.1f}% of a core; {load()})")
            if "python-aio" in langs:
                lg = worker("python-aio", "http", dev.http, "lag", args.pending,
                            f"bench/bindings/lag-python/{ms:g}", args.out, args.python, dev.ca)
                print(f"python asyncio loop lag with {lg['pending']} pending acquires on {lg['pending']} keys: "
                      f"p99 {lg['p99_ms']:.2f} ms (p50 {lg['p50_ms']:.2f} ms, max {lg['max_ms']:.2f} ms; "
                      f"cpu {100 * lg['cpu_secs'] / lg['secs']:.1f}% of a core; {load()})")
        finally:
            if ms > 0 and lat.procs:
                lat.fault(0)
        return lines
    finally:
        lat.close()


if __name__ == "__main__":
    main()
