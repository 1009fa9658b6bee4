#!/usr/bin/env python3
"""The stress run (`make stress RUNS=N`; `make stress-short`, 3 runs, is part of `make test`).

Runs the lock and semaphore contention examples of every language RUNS times each,
up to J at a time, and counts the runs that failed:

  rust-leader_election     examples/rust leader_election (3 candidates, crash failover)
  rust-semaphore_workers   examples/rust semaphore_workers (6 workers, 2 slots)
  rust-fenced_write        examples/rust fenced_write (a deposed leader's write refused)
  c-semaphore_worker       examples/c semaphore_worker 5 2 3 (as in make examples-c)
  c-semaphore_worker_10    examples/c semaphore_worker 10 2 3 (10 workers on 2 slots)
  c-leader_demo            examples/c leader_demo.sh (3 processes, SIGTERM step-downs)
  python-leader_election   examples/python/leader_election.py (asyncio, resign handover)
  python-semaphore_worker  examples/python/semaphore_worker.py (5 threads, 2 slots)
  node-leader_election     examples/node/leader_election.js (crash failover, fencing)
  node-semaphore_worker    examples/node/semaphore_worker.js (5 worker processes, 2 slots)

A run fails when the example exits non-zero (each checks its own invariant: the
semaphore's limit, growing fencing tokens, every candidate leading once), when it
runs longer than --timeout seconds (its process group is sent SIGTERM, then
SIGKILL), or when its output shows a problem its exit status does not: a Python
traceback or Rust panic (a crashed thread can leave the exit status 0), a slot or
leadership lost mid-job, a semaphore job that never ran. Each failed run's output
is kept in target/stress/<example>-<n>.log; the logs of the previous stress run
are removed first.

Every run talks to its own dev server (CONSUL_* variables are removed from its
environment, so the Rust, Python and Node examples start one and the C ones run
under ffi/tests/c/with-devserver.sh): parallel runs never share keys.

Needs what `make stress` builds: target/debug/{leader_election,semaphore_workers,
fenced_write,baton-devserver}, target/c-examples/{semaphore_worker,leader_worker},
the wheel in the Python running this script, and the Node addon.

  run.py [--runs N] [-j J] [--timeout S] [--only NAME]... [--list] [--self-test]

RUNS and STRESS_J in the environment set the defaults of --runs (20) and -j (the
number of CPUs).
"""

import argparse
import glob
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def count(pattern, want, what):
    """An output check: `pattern` (a multiline regex) matches exactly `want` times."""

    def check(out):
        n = len(re.findall(pattern, out, re.M))
        return [] if n == want else [f"{n} {what} in the output, expected {want}"]

    return check


def absent(pattern, what):
    """An output check: `pattern` never matches."""

    def check(out):
        return [what] if re.search(pattern, out, re.M) else []

    return check


# Problems an exit status can hide (a thread that died prints this and the process may
# still exit 0); checked for every example.
COMMON_CHECKS = [
    absent(r"^Traceback \(most recent call last\)", "a Python traceback in the output"),
    absent(r"panicked at", "a Rust panic in the output"),
]


class Example:
    """argv runs in the repository root; `needs`: paths (globs) that must exist first."""

    def __init__(self, name, argv, needs, checks=(), env=None):
        self.name, self.argv, self.needs = name, argv, needs
        self.checks = list(checks) + COMMON_CHECKS
        self.env = env or {}


def examples(python):
    debug = os.path.join(ROOT, "target", "debug")
    cex = os.path.join(ROOT, "target", "c-examples")
    devserver = os.path.join(debug, "baton-devserver")
    with_dev = [os.path.join(ROOT, "ffi", "tests", "c", "with-devserver.sh"), devserver]
    node_addon = os.path.join(ROOT, "bindings", "node", "consul-baton.*.node")  # a glob
    return [
        # The longest first, so that a round's runs pack well onto J slots.
        Example("node-leader_election", ["node", "examples/node/leader_election.js"],
                [devserver, node_addon],
                [absent(r": lost leadership, stopping work", "a leader lost leadership while working")]),
        Example("rust-leader_election", [os.path.join(debug, "leader_election")],
                [os.path.join(debug, "leader_election")],
                [absent(r": lost leadership, stopping work", "a leader lost leadership while working")]),
        Example("python-leader_election", [python, "examples/python/leader_election.py"],
                [devserver]),
        Example("node-semaphore_worker", ["node", "examples/node/semaphore_worker.js"],
                [devserver, node_addon],
                [absent(r"\(slot lost, abandoned\)", "a worker lost its slot mid-job")]),
        Example("rust-semaphore_workers", [os.path.join(debug, "semaphore_workers")],
                [os.path.join(debug, "semaphore_workers")],
                [count(r"^worker \d+: job \d+ done$", 12, "jobs done"),
                 absent(r"slot lost, abandoning job", "a worker lost its slot mid-job")]),
        Example("c-semaphore_worker_10",
                with_dev + [os.path.join(cex, "semaphore_worker"), "10", "2", "3"],
                [devserver, os.path.join(cex, "semaphore_worker")]),
        Example("python-semaphore_worker", [python, "examples/python/semaphore_worker.py"],
                [devserver],
                [count(r"^worker \d+: job \d+ \(\d+ running\)$", 15, "jobs started")]),
        Example("c-semaphore_worker",
                with_dev + [os.path.join(cex, "semaphore_worker"), "5", "2", "3"],
                [devserver, os.path.join(cex, "semaphore_worker")]),
        Example("c-leader_demo", with_dev + ["examples/c/leader_demo.sh", cex],
                [devserver, os.path.join(cex, "leader_worker")]),
        Example("rust-fenced_write", [os.path.join(debug, "fenced_write")],
                [os.path.join(debug, "fenced_write")]),
    ]


def run_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONSUL_")}
    env["PYTHONUNBUFFERED"] = "1"  # a timed-out run's log keeps what it printed
    env.update(extra)
    return env


class Result:
    def __init__(self, example, n, status, seconds, problems, log):
        self.example, self.n, self.status = example, n, status
        self.seconds, self.problems, self.log = seconds, problems, log


def kill_group(pgid, sig):
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_one(ex, n, out_dir, timeout, running, lock, stop):
    """Runs example `ex` once (run number `n`); returns a Result, or None when the run was
    cut short by an interrupt (`stop`). Keeps the output as out_dir/<example>-<n>.log if the
    run failed. `running` (guarded by `lock`) maps the pids of the runs under way to them."""
    log = os.path.join(out_dir, f"{ex.name}-{n}.log")
    tmp = os.path.join(out_dir, f".{ex.name}-{n}.out")
    timed_out = False
    with open(tmp, "w+b") as out:
        start = time.monotonic()
        p = subprocess.Popen(ex.argv, cwd=ROOT, env=run_env(ex.env), stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        with lock:
            running[p.pid] = p
            if stop.is_set():  # interrupted while this run started
                kill_group(p.pid, signal.SIGKILL)
        try:
            try:
                status = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                kill_group(p.pid, signal.SIGTERM)  # lets the C leader demo print its workers' logs
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                kill_group(p.pid, signal.SIGKILL)
                status = p.wait()
        finally:
            with lock:
                running.pop(p.pid, None)
        seconds = time.monotonic() - start
        # Whatever the example left behind in its group (a dev server still stopping).
        kill_group(p.pid, signal.SIGKILL)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if stop.is_set() and status != 0:
        os.remove(tmp)
        return None
    problems = []
    if timed_out:
        problems.append(f"timed out after {timeout:g} s")
    elif status != 0:
        problems.append(f"exit status {status}" if status > 0 else f"killed by signal {-status}")
    if not timed_out:
        for check in ex.checks:
            problems += check(text)
    if problems:
        with open(log, "w") as f:
            f.write(f"# {ex.name} run {n}: FAILED: {'; '.join(problems)}\n")
            f.write(f"# command: {' '.join(ex.argv)} (in {ROOT})\n")
            f.write(f"# duration {seconds:.2f} s, exit status {status}\n\n")
            f.write(text)
        os.remove(tmp)
        return Result(ex, n, status, seconds, problems, log)
    os.remove(tmp)
    return Result(ex, n, status, seconds, [], None)


def fmt_secs(s):
    return f"{s:.2f}" if s < 10 else f"{s:.1f}"


def fmt_elapsed(s):
    m, s = divmod(int(round(s)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


def stress(exs, runs, jobs, timeout, out_dir, quiet=False):
    """Runs every example `runs` times, `jobs` at a time. Returns (results, interrupted)."""
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):  # the previous stress run's logs
        if f.endswith(".log") or f.endswith(".out"):
            os.remove(os.path.join(out_dir, f))
    queue = [(ex, n) for n in range(1, runs + 1) for ex in exs]
    total = len(queue)
    queue.reverse()
    results, running = [], {}
    lock, stop = threading.Lock(), threading.Event()
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    started = time.monotonic()
    last_report = [started]

    def worker():
        while not stop.is_set():
            with lock:
                if not queue:
                    return
                ex, n = queue.pop()
            try:
                r = run_one(ex, n, out_dir, timeout, running, lock, stop)
            except OSError as e:
                r = Result(ex, n, None, 0.0, [f"could not run: {e}"], None)
            if r is None:
                return
            with lock:
                results.append(r)
                if r.problems:
                    where = f" -> {os.path.relpath(r.log, ROOT)}" if r.log else ""
                    say(f"FAIL {ex.name} #{n} ({fmt_secs(r.seconds)} s): "
                        f"{'; '.join(r.problems)}{where}")
                now = time.monotonic()
                if now - last_report[0] >= 30 and len(results) < total:
                    last_report[0] = now
                    failed = sum(1 for x in results if x.problems)
                    say(f"... {len(results)}/{total} runs done, {failed} failed, "
                        f"{fmt_elapsed(now - started)}")

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(jobs)]
    for t in threads:
        t.start()
    interrupted = False
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        interrupted = True
        with lock:
            stop.set()
            for p in running.values():
                kill_group(p.pid, signal.SIGKILL)
        for t in threads:
            t.join()
    return results, interrupted


def summary(exs, results):
    """The per-example table, as lines."""
    w = max(len(ex.name) for ex in exs)
    lines = [f"{'example':<{w}}  {'runs':>5} {'failed':>6} {'timeouts':>8}  "
             f"{'min s':>6} {'median s':>8} {'max s':>6}"]
    for ex in exs:
        rs = [r for r in results if r.example is ex]
        if not rs:
            lines.append(f"{ex.name:<{w}}  {0:>5}")
            continue
        secs = sorted(r.seconds for r in rs)
        failed = sum(1 for r in rs if r.problems)
        timeouts = sum(1 for r in rs if any(p.startswith("timed out") for p in r.problems))
        lines.append(f"{ex.name:<{w}}  {len(rs):>5} {failed:>6} {timeouts:>8}  "
                     f"{fmt_secs(secs[0]):>6} {fmt_secs(statistics.median(secs)):>8} "
                     f"{fmt_secs(secs[-1]):>6}")
    return lines


def self_test():
    """The runner fails when it should: a non-zero exit, a timeout, a failed output check;
    a passing run leaves no log."""
    py = sys.executable
    exs = [
        Example("ok", [py, "-c", "print('worker 1: job 1 done')"], [],
                [count(r"^worker \d+: job \d+ done$", 1, "jobs done")]),
        Example("exits1", [py, "-c", "import sys; print('boom'); sys.exit(1)"], []),
        Example("hangs", [py, "-c", "import time; print('waiting'); time.sleep(60)"], []),
        Example("traceback", [py, "-c", "import threading; threading.Thread("
                                        "target=lambda: 1 / 0).start()"], []),
        Example("few-jobs", [py, "-c", "print('worker 1: job 1 done')"], [],
                [count(r"^worker \d+: job \d+ done$", 2, "jobs done")]),
    ]
    with tempfile.TemporaryDirectory() as d:
        results, _ = stress(exs, 2, 4, 1.5, d, quiet=True)
        logs = sorted(os.listdir(d))
        by = {ex.name: [r for r in results if r.example is ex] for ex in exs}
        want_logs = sorted(f"{name}-{n}.log" for name in ("exits1", "hangs", "traceback", "few-jobs")
                           for n in (1, 2))
        assert logs == want_logs, logs
        assert all(not r.problems for r in by["ok"])
        assert all(r.problems == ["exit status 1"] for r in by["exits1"]), by["exits1"][0].problems
        assert all(r.problems == ["timed out after 1.5 s"] for r in by["hangs"])
        assert all(r.problems == ["a Python traceback in the output"] for r in by["traceback"])
        assert all(r.problems == ["1 jobs done in the output, expected 2"] for r in by["few-jobs"])
        with open(os.path.join(d, "hangs-1.log")) as f:
            text = f.read()
        assert "FAILED: timed out" in text and "waiting" in text, text
        assert len(summary(exs, results)) == 1 + len(exs)
    print("stress runner self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=int(os.environ.get("RUNS") or 20),
                    help="runs of each example (default: $RUNS or 20)")
    ap.add_argument("-j", "--jobs", type=int,
                    default=int(os.environ.get("STRESS_J") or os.cpu_count() or 1),
                    help="runs at a time (default: $STRESS_J or the number of CPUs)")
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds before a run counts as failed (default 120)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="only examples whose name contains NAME (repeatable)")
    ap.add_argument("--out", default=os.path.join(ROOT, "target", "stress"),
                    help="where failed runs' logs go (default target/stress)")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python (with the baton wheel) for the Python examples")
    ap.add_argument("--list", action="store_true", help="list the examples and exit")
    ap.add_argument("--self-test", action="store_true", help="check the runner itself")
    args = ap.parse_args()
    if args.self_test:
        self_test()
        return 0
    exs = examples(args.python)
    if args.only:
        exs = [ex for ex in exs if any(o in ex.name for o in args.only)]
        if not exs:
            ap.error(f"no example matches {args.only}")
    if args.list:
        for ex in exs:
            print(f"{ex.name}: {' '.join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in ex.argv)}")
        return 0
    if args.runs < 1 or args.jobs < 1 or args.timeout <= 0:
        ap.error("--runs, -j and --timeout must be positive")
    missing = sorted({p for ex in exs for p in ex.needs if not glob.glob(p)})
    if missing:
        sys.exit("stress: not built (make stress builds them): "
                 + ", ".join(os.path.relpath(p, ROOT) for p in missing))
    print(f"stress: {len(exs)} examples x {args.runs} runs, {args.jobs} at a time, "
          f"timeout {args.timeout:g} s, each run against its own dev server", flush=True)
    started = time.monotonic()
    results, interrupted = stress(exs, args.runs, args.jobs, args.timeout, args.out)
    elapsed = time.monotonic() - started
    print("\n".join(summary(exs, results)))
    failed = [r for r in results if r.problems]
    print(f"stress: {len(results)} runs in {fmt_elapsed(elapsed)}, {len(failed)} failed"
          + (f"; logs in {os.path.relpath(args.out, ROOT)}/" if failed else "")
          + (" (interrupted)" if interrupted else ""))
    if interrupted:
        return 130
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
