#!/usr/bin/env python3
"""The cross-language test (`make test-cross`, part of `make test`).

Rust (examples/rust/src/bin/cross_worker.rs), C (demo/worker.c over libbaton),
Python (demo/worker.py, the wheel) and, when present, Node (demo/worker.js)
processes contend at once for one lock and one 2-slot semaphore, ROUNDS times
each. Every holding is logged as an interval of CLOCK_MONOTONIC microseconds (one
clock for every process of the machine; the wall clock may be stepped or slewed under
NTP: one run logged Node's holdings, read as its wall-clock start plus monotonic time,
up to 2 ms late against the others', 84 overlaps whose tokens showed the order the other
way round), taken inside
the holding (after acquire returned, before release was called), so measured
intervals can only be shorter than the real ones. This external checker then
proves from the logs alone:

* the lock: no two holdings overlapped, and fencing tokens grew with time;
* the semaphore: never more than 2 holdings at once;
* leader reads: every value a process read through its language's election API
  names a holding that really had that token, and every language read at least
  one other language's leader value.

Starts target/debug/baton-devserver unless CONSUL_HTTP_ADDR is set.
"""

import os
import subprocess
import sys
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROUNDS = int(os.environ.get("BATON_CROSS_ROUNDS", "100"))


def contenders():
    c = {
        "rust": [os.path.join(ROOT, "target", "debug", "cross_worker")],
        "c": [os.path.join(ROOT, "target", "demo", "worker"), "contend"],
        "python": [sys.executable, os.path.join(ROOT, "demo", "worker.py"), "contend"],
    }
    if os.path.exists(os.path.join(ROOT, "demo", "worker.js")):
        c["node"] = ["node", os.path.join(ROOT, "demo", "worker.js"), "contend"]
    return c


def start_devserver():
    # BATON_TEST_DEVSERVER_PRETTY: answer in `consul agent -dev`'s layout (indented JSON).
    pretty = os.environ.get("BATON_TEST_DEVSERVER_PRETTY", "") not in ("", "0")
    p = subprocess.Popen(
        [os.path.join(ROOT, "target", "debug", "baton-devserver"), "--port", "0"]
        + (["--pretty"] if pretty else []),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = p.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        p.kill()
        sys.exit(f"the dev server did not start: {line!r}")
    threading.Thread(target=p.stdout.read, daemon=True).start()
    return p, line.split("=", 1)[1]


def parse(lines):
    out = []
    for line in lines:
        if line.startswith("@"):
            kind, *fields = line[1:].split()
            out.append((kind, dict(f.split("=", 1) for f in fields)))
    return out


def check(logs):
    """logs: name -> [(kind, fields)]. Returns a list of problems (empty: all good)."""
    problems = []
    locks, sems, saws = [], [], []
    for name, events in logs.items():
        for kind, f in events:
            if kind == "hold" and f["kind"] == "lock":
                locks.append((int(f["start"]), int(f["end"]), int(f["token"]), name))
            elif kind == "hold" and f["kind"] == "sem":
                sems.append((int(f["start"]), int(f["end"]), name))
            elif kind == "saw":
                saws.append((name, f["value"], int(f["token"])))
        if not any(k == "done" for k, _ in events):
            problems.append(f"{name} did not finish")

    locks.sort()
    for prev, cur in zip(locks, locks[1:]):
        if cur[0] < prev[1]:
            problems.append(f"lock overlap: {prev[3]} {prev[:2]} and {cur[3]} {cur[:2]}")
        if cur[2] <= prev[2]:
            problems.append(f"token did not grow: {prev[3]} {prev[2]} then {cur[3]} {cur[2]}")
    expected = ROUNDS * len(logs)
    if len(locks) != expected:
        problems.append(f"{len(locks)} lock holdings logged, {expected} expected")

    edges = sorted([(s, 1) for s, _, _ in sems] + [(e, -1) for _, e, _ in sems],
                   key=lambda x: (x[0], x[1]))
    now, most = 0, 0
    for _, d in edges:
        now += d
        most = max(most, now)
    if most > 2:
        problems.append(f"{most} semaphore holders at once (limit 2)")

    by_token = {t: n for _, _, t, n in locks}
    read_others = {name: set() for name in logs}
    for reader, value, token in saws:
        holder = by_token.get(token)
        if holder is None or not value.startswith(holder + ":"):
            problems.append(f"{reader} read leader {value} with token {token}: "
                            f"no such holding (token's holder: {holder})")
        elif holder != reader:
            read_others[reader].add(holder)
    for reader, seen in read_others.items():
        if not seen:
            problems.append(f"{reader} never read another language's leader value")
    summary = (f"lock: {len(locks)} holdings by {', '.join(sorted(logs))}, no overlap, "
               f"tokens {locks[0][2] if locks else '-'}..{locks[-1][2] if locks else '-'} "
               f"increasing; semaphore: {len(sems)} holdings, at most {most} at once; "
               f"leader reads: {len(saws)}, "
               + "; ".join(f"{r} read {', '.join(sorted(s))}" for r, s in sorted(read_others.items())))
    return problems, summary


def self_test():
    """The checker must catch what it claims to: feed it bad logs."""
    done = ("done", {})

    def hold(kind, start, end, token=None):
        f = {"kind": kind, "start": str(start), "end": str(end)}
        if token is not None:
            f["token"] = str(token)
        return ("hold", f)

    global ROUNDS
    saved, ROUNDS = ROUNDS, 2
    try:
        good = {
            "a": [hold("lock", 0, 10, 5), hold("lock", 20, 30, 7), ("saw", {"value": "b:1", "token": "6"}), done],
            "b": [hold("lock", 11, 19, 6), hold("lock", 31, 40, 8), ("saw", {"value": "a:2", "token": "7"}), done],
        }
        assert check(good)[0] == [], check(good)[0]
        bad = {k: list(v) for k, v in good.items()}
        bad["b"][0] = hold("lock", 9, 19, 6)  # starts before a's first holding ended
        assert any("overlap" in p for p in check(bad)[0])
        bad = {k: list(v) for k, v in good.items()}
        bad["b"][1] = hold("lock", 31, 40, 4)  # a later holding with a smaller token
        assert any("token did not grow" in p for p in check(bad)[0])
        bad = {k: list(v) for k, v in good.items()}
        bad["a"][2] = ("saw", {"value": "a:2", "token": "6"})  # token 6 was b's
        assert any("no such holding" in p for p in check(bad)[0])
        bad = {k: list(v) + [hold("sem", 0, 10), hold("sem", 1, 9), hold("sem", 2, 8)] for k, v in good.items()}
        assert any("semaphore holders at once" in p for p in check(bad)[0])
        bad = {k: [e for e in v if e != done] for k, v in good.items()}
        assert any("did not finish" in p for p in check(bad)[0])
    finally:
        ROUNDS = saved
    print("cross-language checker: self-test passed (overlap, token order, bad leader read, "
          "semaphore excess, unfinished worker are all caught)")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    env = dict(os.environ)
    server = None
    if not env.get("CONSUL_HTTP_ADDR"):
        server, env["CONSUL_HTTP_ADDR"] = start_devserver()
    run = os.getpid()
    key, prefix = f"cross/{run}/lock", f"cross/{run}/pool"
    procs = {}
    try:
        for name, argv in contenders().items():
            procs[name] = subprocess.Popen(argv + [name, key, prefix, str(ROUNDS)], cwd=ROOT,
                                           env=env, stdout=subprocess.PIPE, text=True)
        outputs = {name: p.communicate(timeout=600)[0].splitlines() for name, p in procs.items()}
        codes = {name: p.returncode for name, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
        if server is not None:
            server.terminate()
            server.wait()
    problems, summary = check({name: parse(lines) for name, lines in outputs.items()})
    problems += [f"{name} exited with {code}" for name, code in codes.items() if code != 0]
    print(f"cross-language: {summary}")
    for p in problems:
        print(f"cross-language: FAIL: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
