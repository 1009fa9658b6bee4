#!/usr/bin/env python3
"""`make bench-bindings`: what each binding costs on top of the Rust core, and the core on top
of the wire, at one or more server latencies.

One dev server in its own process; against it, a worker per language (bench/bindings/worker.*:
Rust, C over libbaton, Python sync, Python `baton.aio`, Node) and the floor client (the Rust
worker's `floor` mode: `PUT /v1/kv/KEY?acquire=S` then `PUT ...?release=S` on one keep-alive
connection, no JSON, no checks: what the wire allows) run

* uncontended acquire+release cycles on a key of their own: cycles/s and p50/p99 of a cycle,
  after 300 warm-up cycles (the session exists, the connection is open, and V8 has compiled
  the Node path: its tiering compiles around the 100th and 500th call, on a thread that
  competes for one of the two cores; a service pays that once, not per operation).
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

Then `ratio <lang>/rust X.XX` lines, and `ratio rust/floor`: the cycles/s of the second divided
by the first's (cost per cycle), taken in each round (languages of one round run back to back,
under the same load) and the median over the rounds printed (a load spike on the shared machine
then costs one round, not the figure).

--latency-ms 0,0.3,1 repeats all of it at each server latency: beyond 0, every worker reaches
the dev server through bench-bindings-latency (bench/bindings/latency.rs), a proxy that holds
each request chunk for that long (the dev server's own latency fault sleeps on a millisecond
timer: asked for 0.3 ms it adds 1.5; --latency-via devserver uses it anyway); the loop-lag
runs use the dev server's fault (a thousand connections through the proxy would measure the
proxy). The issue's targets (every `ratio <binding>/rust` <= 1.10 and `ratio rust/floor` <=
1.15 at 0, 0.3 and 1 ms; loop lag p99 < 1 ms) are reported, never enforced: this is a
benchmark. It fails only when a worker fails.

With 2 CPUs or more, the dev server (and the latency proxy) run on the first CPU and every
worker on the others (see `Pin`; --no-pin leaves them to the scheduler): at 0 ms on a VM, where
a wake-up across CPUs costs tens of microseconds, unpinned figures depend on where the
scheduler put each process in each round (the floor client ran at 45,000 cycles/s beside the
server and 6,000 across, so `ratio rust/floor` read 7.04 in one unpinned run). Pinned, every
client pays the same hop, as a service does whose agent runs on another core.

Builds nothing: `make bench-bindings` builds the dev server, the Rust and C workers, the latency
proxy, the wheel and the Node addon first. Stdlib only.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "bindings")
LANGS = ("floor", "floor-txn", "rust", "c", "python", "python-aio", "node", "floor-asyncio",
         "floor-node")
# The floor clients: no baton, only the wire (floor: blocking, in Rust; floor-txn: the same, with
# the txn requests baton itself sends), or the wire driven by an event loop (floor-node: a
# net.Socket; floor-asyncio: an asyncio Protocol).
FLOORS = ("floor", "floor-txn", "floor-asyncio", "floor-node")
# Variants run only when named in --langs, to see whether spinning still pays: the asyncio and
# Node workers with their event loop's polling switched off (-nospin: BATON_AIO_SPIN=0,
# BATON_NODE_SPIN=0), and with no spinning anywhere (-park: also BATON_POOL_BIND=0, the baton
# thread that delivered an outcome parks at once instead of staying bound to the loop's turn).
VARIANTS = {"python-aio-nospin": ("python-aio", {"BATON_AIO_SPIN": "0"}),
            "python-aio-park": ("python-aio", {"BATON_AIO_SPIN": "0", "BATON_POOL_BIND": "0"}),
            "node-nospin": ("node", {"BATON_NODE_SPIN": "0"}),
            "node-park": ("node", {"BATON_NODE_SPIN": "0", "BATON_POOL_BIND": "0"})}
# Warm-up cycles of every worker before it measures (see the module docs).
WARM = 300


def worker(lang, addr, mode, n, key, out_dir, python):
    env = None
    if lang in VARIANTS:
        base, extra = VARIANTS[lang]
        env = dict(os.environ, **extra)
        return worker_as(base, lang, env, addr, mode, n, key, out_dir, python)
    return worker_as(lang, lang, env, addr, mode, n, key, out_dir, python)


def worker_as(lang, name, env, addr, mode, n, key, out_dir, python):
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
    p = subprocess.run(argv + [addr, mode, str(n), key], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=env, preexec_fn=PIN.worker)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        sys.exit(f"bench-bindings: the {name} worker ({mode}) failed (exit {p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")
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


class Latency:
    """Where the clients of one latency step connect: the dev server itself (0 ms), or a
    bench-bindings-latency proxy in front of it, or the dev server with its own latency fault
    (--latency-via devserver; see latency.rs for why that is not the default)."""

    def __init__(self, server, ms, via, proxy_bin):
        self.server, self.ms, self.via, self.proc = server, ms, via, None
        self.addr = server
        if ms > 0 and via == "proxy":
            self.proc = subprocess.Popen([proxy_bin, server, str(round(ms * 1000))],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         preexec_fn=PIN.server)
            first = self.proc.stdout.readline().strip()
            if not first.startswith("BENCH_LATENCY_ADDR="):
                sys.exit(f"bench-bindings: unexpected first line from the latency proxy: {first!r}")
            self.addr = first.split("=", 1)[1]
        elif ms > 0:
            self.fault(ms)

    def fault(self, ms):
        get_json(f"http://{self.server}/_devserver/latency?d={round(ms * 1000)}us", "PUT")

    def close(self):
        if self.proc is not None:
            self.proc.stdin.close()  # the proxy ends and joins its threads
            self.proc.wait(timeout=30)
        elif self.ms > 0:
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
    latencies = [float(x) for x in args.latency_ms.split(",") if x.strip()]
    proxy_bin = os.path.join(ROOT, "target", "release", "bench-bindings-latency")

    server = subprocess.Popen([args.devserver, "--port", "0", "--max-conns-per-client", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              preexec_fn=PIN.server)
    args.server_pid = server.pid
    try:
        first = server.stdout.readline().strip()
        if not first.startswith("BATON_DEVSERVER_ADDR="):
            sys.exit(f"bench-bindings: unexpected first line from the dev server: {first!r}")
        dev = first.split("=", 1)[1].replace("http://", "")
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        print(f"bench-bindings: dev server (own process) at {dev}; {machine()}; {now}; "
              f"{PIN.describe()}")
        print(f"uncontended acquire+release on one key, one thread: {args.rounds} rounds x "
              f"{args.cycles} cycles per language and latency (medians over the rounds); "
              f"floor = two raw PUTs (?acquire=, ?release=) on one keep-alive connection")
        summary = []
        for ms in latencies:
            summary += step(args, dev, ms, langs, proxy_bin)
        if len(latencies) > 1:
            print("summary (cost per cycle, median over the rounds):")
            for line in summary:
                print("  " + line)
    finally:
        server.terminate()
        server.wait(timeout=10)


def step(args, dev, ms, langs, proxy_bin):
    """One latency: cycles, hand-offs, ratios, loop lag. Returns the ratio lines."""
    lat = Latency(dev, ms, args.latency_via, proxy_bin)
    tag = f"latency {ms:g} ms"
    try:
        via = {"proxy": "latency proxy", "devserver": "dev server latency fault"}[args.latency_via]
        print(f"== {tag}" + (f" (added by the {via})" if ms > 0 else " (none added)")
              + f"; {load()}")
        run = lambda lang, mode, n, key: worker(lang, lat.addr, mode, n, key, args.out, args.python)
        rounds = {l: [] for l in langs}
        for r in range(args.rounds):
            order = langs[r % len(langs):] + langs[:r % len(langs)]
            for lang in order:
                before = requests_total(dev)
                server_before = server_cpu_secs(args.server_pid)
                x = run(lang, "cycles", args.cycles, f"bench/bindings/{lang}/{ms:g}")
                server_after = server_cpu_secs(args.server_pid)
                # Every request of the run (session, warm-up, close included) per cycle.
                x["requests"] = requests_total(dev) - before
                if server_before is not None and server_after is not None:
                    x["server_cpu_secs"] = server_after - server_before
                x["load1"] = os.getloadavg()[0]
                rounds[lang].append(x)
        rate = {}
        for lang in langs:
            rs = rounds[lang]
            rate[lang] = statistics.median(x["cycles"] / x["secs"] for x in rs)
            p50 = statistics.median(x["p50_us"] for x in rs)
            p99 = statistics.median(x["p99_us"] for x in rs)
            cpu = statistics.median(x["cpu_secs"] / x["cycles"] for x in rs) if "cpu_secs" in rs[0] else None
            req = statistics.median(x["requests"] / (x["cycles"] + WARM) for x in rs)
            each = " ".join(f"{x['cycles'] / x['secs']:.0f}" for x in rs)
            cpu_text = f"cpu {cpu * 1e6:5.0f} us/cycle" if cpu is not None else "cpu     n/a      "
            # The server's CPU over every cycle of the run, warm-up included (as req/cycle).
            server = (statistics.median(x["server_cpu_secs"] / (x["cycles"] + WARM) for x in rs)
                      if "server_cpu_secs" in rs[0] else None)
            server_text = f"server {server * 1e6:4.0f} us/cycle" if server is not None else ""
            print(f"  {lang:<17} {rate[lang]:>7.0f} cycles/s   p50 {ms_(p50)}   p99 {ms_(p99)}   "
                  f"{cpu_text}   {server_text}   {req:.2f} req/cycle   (rounds: {each}; load1 "
                  f"{min(x['load1'] for x in rs):.2f}-{max(x['load1'] for x in rs):.2f})")

        if not args.no_handoff:
            print(f"contended hand-off, two holders alternating on one key ({args.handoffs} hand-offs: "
                  "holder's release() called -> waiter's acquire() returned)")
            for lang in langs:
                if lang in FLOORS:
                    continue
                h = run(lang, "handoff", args.handoffs, f"bench/bindings/handoff-{lang}/{ms:g}")
                print(f"  {lang:<17} p50 {ms_(h['p50_us'])}   p99 {ms_(h['p99_us'])}")

        lines = []

        def ratio(a, b):
            # Cost per cycle of a over b, taken in each round (the languages of one round run
            # back to back, under the same load), the median over the rounds.
            per_round = [(y["cycles"] / y["secs"]) / (x["cycles"] / x["secs"])
                         for x, y in zip(rounds[a], rounds[b])]
            line = f"ratio {a}/{b} {statistics.median(per_round):.2f}"
            print(line + f"   ({tag})")
            lines.append(f"{tag:<16} {line}")

        if "rust" in langs:
            ratio("rust", "floor")
            # Of which: baton's requests over the floor's (what the server spends on a txn),
            # and baton's client side over the same requests sent raw.
            if "floor-txn" in langs:
                ratio("floor-txn", "floor")
                ratio("rust", "floor-txn")
            for lang in ("python", "python-aio", "python-aio-nospin", "python-aio-park", "node",
                         "node-nospin", "node-park", "c"):
                if lang in langs:
                    ratio(lang, "rust")
        # The loops' own floors: what an event loop doing the I/O itself costs over the wire,
        # and what baton costs over that (set beside rust/floor).
        for loop_floor, binding in (("floor-asyncio", "python-aio"), ("floor-node", "node")):
            if loop_floor in langs:
                ratio(loop_floor, "floor")
                if binding in langs:
                    ratio(binding, loop_floor)
        per_cycle = 1e6 / rate["floor"]
        print(f"floor: {per_cycle:.0f} us per cycle, {per_cycle / 2:.0f} us per request ({load()})")

        # Loop lag through the dev server's own fault (a thousand connections through the
        # proxy would measure the proxy): how late timers fire is what counts here.
        if ms > 0 and lat.proc is not None:
            lat.fault(ms)
        try:
            if "node" in langs:
                lg = worker("node", dev, "lag", args.pending, f"bench/bindings/lag-node/{ms:g}", args.out, args.python)
                print(f"node event-loop lag with {lg['pending']} pending acquires on {lg['pending']} keys: "
                      f"p99 {lg['p99_ms']:.2f} ms (p50 {lg['p50_ms']:.2f} ms, max {lg['max_ms']:.2f} ms; "
                      f"cpu {100 * lg['cpu_secs'] / lg['secs']:.1f}% of a core; {load()})")
            if "python-aio" in langs:
                lg = worker("python-aio", dev, "lag", args.pending, f"bench/bindings/lag-python/{ms:g}", args.out, args.python)
                print(f"python asyncio loop lag with {lg['pending']} pending acquires on {lg['pending']} keys: "
                      f"p99 {lg['p99_ms']:.2f} ms (p50 {lg['p50_ms']:.2f} ms, max {lg['max_ms']:.2f} ms; "
                      f"cpu {100 * lg['cpu_secs'] / lg['secs']:.1f}% of a core; {load()})")
        finally:
            if ms > 0 and lat.proc is not None:
                lat.fault(0)
        return lines
    finally:
        lat.close()


if __name__ == "__main__":
    main()
