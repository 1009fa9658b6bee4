#!/usr/bin/env python3
"""`make bench-bindings`: what each binding costs on top of the Rust core.

One dev server in its own process; against it, a worker per language (bench/bindings/worker.*:
Rust, C over libbaton, Python sync, Python `baton.aio`, Node) runs

* uncontended acquire+release cycles on a key of its own: cycles/s and p50/p99 of a cycle,
  after 300 warm-up cycles (the session exists, the connection is open, and V8 has compiled
  the Node path: its tiering compiles around the 100th and 500th call, on a thread that
  competes for one of the two cores; a service pays that once, not per operation).
  ROUNDS rounds, each language once per round in a rotating order (a slow moment of a shared
  machine then hits every language alike); the figures are the medians over the rounds;
* contended hand-off: two holders (two clients) alternate on one key; the latency from the
  holder's release() call to the waiter's acquire() returning, p50/p99;
* Node event-loop lag and Python asyncio loop lag (p99 of how late a 10 ms timer fires) while
  1,000 acquires on 1,000 keys are pending.

Then `ratio <lang>/rust X.XX` lines: the Rust core's cycles/s divided by the binding's, taken
in each round (languages of one round run back to back, under the same load) and the median
over the rounds printed (a load spike on the shared machine then costs one round, not the
figure). The
targets (python <= 1.2, node <= 1.3, c <= 1.1, loop lag p99 <= 10 ms) are reported, never
enforced: this is a benchmark. It fails only when a worker fails.

Builds nothing: `make bench-bindings` builds the dev server, the Rust and C workers, the wheel
and the Node addon first. Stdlib only.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "bench", "bindings")
LANGS = ("rust", "c", "python", "python-aio", "node")


def worker(lang, addr, mode, n, key, out_dir, python):
    argv = {
        "rust": [os.path.join(ROOT, "target", "release", "bench-bindings-rust")],
        "c": [os.path.join(out_dir, "worker-c")],
        "python": [python, os.path.join(HERE, "worker.py")],
        "python-aio": [python, os.path.join(HERE, "worker.py")],
        "node": ["node", os.path.join(HERE, "worker.js")],
    }[lang]
    if lang == "python-aio":
        mode = f"aio-{mode}"
    p = subprocess.run(argv + [addr, mode, str(n), key], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    lines = [l for l in p.stdout.splitlines() if l.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        sys.exit(f"bench-bindings: the {lang} worker ({mode}) failed (exit {p.returncode}):\n"
                 f"{p.stdout}{p.stderr}")
    return json.loads(lines[-1][len("RESULT "):])


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


def ms(us):
    return f"{us / 1000:.3f} ms"


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
    args = ap.parse_args()
    langs = [l for l in args.langs.split(",") if l]
    for l in langs:
        if l not in LANGS:
            sys.exit(f"unknown language {l!r} (known: {', '.join(LANGS)})")

    server = subprocess.Popen([args.devserver, "--port", "0", "--max-conns-per-client", "0"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = server.stdout.readline().strip()
        if not first.startswith("BATON_DEVSERVER_ADDR="):
            sys.exit(f"bench-bindings: unexpected first line from the dev server: {first!r}")
        addr = first.split("=", 1)[1]
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        print(f"bench-bindings: dev server (own process) at {addr}; {machine()}; {now}")
        print(f"uncontended acquire+release on one key, one thread: {args.rounds} rounds x "
              f"{args.cycles} cycles per language (medians over the rounds)")
        run = lambda lang, mode, n, key: worker(lang, addr, mode, n, key, args.out, args.python)

        rounds = {l: [] for l in langs}
        for r in range(args.rounds):
            order = langs[r % len(langs):] + langs[:r % len(langs)]
            for lang in order:
                rounds[lang].append(run(lang, "cycles", args.cycles, f"bench/bindings/{lang}"))
        rate = {}
        for lang in langs:
            rs = rounds[lang]
            rate[lang] = statistics.median(x["cycles"] / x["secs"] for x in rs)
            p50 = statistics.median(x["p50_us"] for x in rs)
            p99 = statistics.median(x["p99_us"] for x in rs)
            each = " ".join(f"{x['cycles'] / x['secs']:.0f}" for x in rs)
            print(f"  {lang:<11} {rate[lang]:>7.0f} cycles/s   p50 {ms(p50)}   p99 {ms(p99)}   (rounds: {each})")

        print(f"contended hand-off, two holders alternating on one key ({args.handoffs} hand-offs: "
              "holder's release() called -> waiter's acquire() returned)")
        for lang in langs:
            h = run(lang, "handoff", args.handoffs, f"bench/bindings/handoff-{lang}")
            print(f"  {lang:<11} p50 {ms(h['p50_us'])}   p99 {ms(h['p99_us'])}")

        if "rust" in langs:
            for lang in ("python", "python-aio", "node", "c"):
                if lang in langs:
                    per_round = [(r["cycles"] / r["secs"]) / (x["cycles"] / x["secs"])
                                 for r, x in zip(rounds["rust"], rounds[lang])]
                    print(f"ratio {lang}/rust {statistics.median(per_round):.2f}")

        if "node" in langs:
            lag = run("node", "lag", args.pending, "bench/bindings/lag-node")
            print(f"node event-loop lag with {lag['pending']} pending acquires on {lag['pending']} keys: "
                  f"p99 {lag['p99_ms']:.2f} ms (p50 {lag['p50_ms']:.2f} ms, max {lag['max_ms']:.2f} ms)")
        if "python-aio" in langs:
            lag = run("python-aio", "lag", args.pending, "bench/bindings/lag-python")
            print(f"python asyncio loop lag with {lag['pending']} pending acquires on {lag['pending']} keys: "
                  f"p99 {lag['p99_ms']:.2f} ms (p50 {lag['p50_ms']:.2f} ms, max {lag['max_ms']:.2f} ms)")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
