#!/usr/bin/env python3
"""`make demo`: a mixed-language fleet on one Consul, live.

Workers written in C (demo/worker.c, over libbaton), Python (demo/worker.py, the
wheel) and Node (demo/worker.js, the addon) campaign for one leader key:

1. one of them leads and shows its fencing token;
2. the leader is killed with SIGKILL (no goodbye): its session has to expire at
   Consul (at most 2 x TTL) and the lock-delay has to pass before the next one may
   lead; the measured failover is printed next to that budget;
3. the new leader resigns on SIGTERM: the handoff is immediate (no lock-delay);
4. then the three share a semaphore of 2 slots; every acquisition and release is
   shown with the holders at that moment, and the run fails if 3 ever overlapped.

Uses the Consul at CONSUL_HTTP_ADDR if set, else starts target/release/baton-devserver.
Everything it started is stopped, and every session it made is gone at the end
(checked). Workers' event lines look like `@leading t=<unix ms> token=N`.
"""

import heapq
import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "service/baton-demo/leader"
SEM_PREFIX = "service/baton-demo/workers"
SEM_LIMIT = 2
T0 = time.time()
OUT = os.path.join(ROOT, "target", "demo")
# (Unix ms, label) of what the run did to the workers, for the timeline picture.
MARKS = []


def log(msg):
    print(f"[{time.time() - T0:7.3f}s] {msg}", flush=True)


def now_ms():
    return int(time.time() * 1000)


class Failure(Exception):
    pass


def worker_commands():
    """The workers that can run here: name -> argv prefix."""
    cmds = {
        "c": [os.path.join(ROOT, "target", "demo", "worker")],
        "python": [sys.executable, os.path.join(ROOT, "demo", "worker.py")],
    }
    node_worker = os.path.join(ROOT, "demo", "worker.js")
    if os.path.exists(node_worker):
        cmds["node"] = ["node", node_worker]
    return cmds


class Fleet:
    """Started processes; their `@event` lines arrive on one queue."""

    def __init__(self, env):
        self.env = env
        self.events = queue.Queue()
        self.backlog = []
        self.procs = {}
        self.record = []  # every @event, for the timeline picture
        self.readers = []  # the threads reading the workers' output

    def start(self, name, argv):
        p = subprocess.Popen(
            argv,
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs[name] = p
        for stream, is_stdout in ((p.stdout, True), (p.stderr, False)):
            t = threading.Thread(target=self._read, args=(name, stream, is_stdout), daemon=True)
            t.start()
            self.readers.append(t)
        return p

    def _read(self, name, stream, is_stdout):
        for line in stream:
            line = line.rstrip("\n")
            if is_stdout and line.startswith("@"):
                kind, *fields = line[1:].split()
                ev = dict(f.split("=", 1) for f in fields)
                ev["t"] = int(ev.get("t", now_ms()))
                self.record.append((name, kind, ev))
                self.events.put((name, kind, ev))
            elif line:
                log(f"  {name}: {line}")

    def next_event(self, timeout, want, since=0):
        """The first event (name, kind, fields) of a kind in `want` stamped at or after
        `since` (Unix ms), within `timeout` s. Lines from different processes can
        arrive out of order, so events not wanted now are kept for later calls."""
        for i, (name, kind, ev) in enumerate(self.backlog):
            if kind in want and ev["t"] >= since:
                del self.backlog[i]
                return name, kind, ev
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                raise Failure(f"no {'/'.join(sorted(want))} event within {timeout:.0f} s")
            try:
                name, kind, ev = self.events.get(timeout=left)
            except queue.Empty:
                continue
            if kind == "lost":
                raise Failure(f"{name} lost leadership unexpectedly ({ev})")
            if kind in want and ev["t"] >= since:
                return name, kind, ev
            self.backlog.append((name, kind, ev))

    def wait_exit(self, name, timeout=15):
        code = self.procs[name].wait(timeout=timeout)
        del self.procs[name]
        if code != 0:
            raise Failure(f"{name} exited with status {code}")

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


def start_devserver():
    binary = os.path.join(ROOT, "target", "release", "baton-devserver")
    p = subprocess.Popen(
        [binary, "--port", "0", "--session-ttl-min", "100ms"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = p.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        p.kill()
        raise Failure(f"the dev server did not start ({line!r})")
    threading.Thread(target=p.stdout.read, daemon=True).start()
    return p, line.split("=", 1)[1]


def http(addr, method, path):
    base = addr if "://" in addr else f"http://{addr}"
    req = urllib.request.Request(base + path, method=method)
    token = os.environ.get("CONSUL_HTTP_TOKEN")
    if token:
        req.add_header("X-Consul-Token", token)
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
    return json.loads(body) if body else None


def leader_phase(fleet, cmds, ttl_ms, delay_ms):
    log(f"== leader election on {KEY}: {', '.join(cmds)} campaign "
        f"(session TTL {ttl_ms / 1000:g} s, lock-delay {delay_ms / 1000:g} s)")
    for name, argv in cmds.items():
        fleet.start(name, argv + ["leader", name, KEY, str(ttl_ms), str(delay_ms)])
    first, _, ev = fleet.next_event(30, {"leading"})
    log(f"{first} leads, fencing token {ev['token']}")
    time.sleep(1)

    log(f"SIGKILL {first}: no release, no resign; Consul must expire its session")
    fleet.procs[first].kill()
    t_kill = now_ms()
    MARKS.append((t_kill, f"SIGKILL {first}"))
    fleet.procs[first].wait()
    del fleet.procs[first]
    budget = 2 * ttl_ms + delay_ms
    second, _, ev = fleet.next_event(budget / 1000 + 20, {"leading"}, since=t_kill)
    failover = ev["t"] - t_kill
    log(f"{second} leads, fencing token {ev['token']}: failover {failover / 1000:.2f} s "
        f"(budget: session expiry <= 2 x TTL = {2 * ttl_ms / 1000:g} s + lock-delay "
        f"{delay_ms / 1000:g} s = {budget / 1000:g} s, plus the few ms a waiter takes to retry)")
    if failover > budget + 2000:
        raise Failure(f"failover took {failover} ms, over the {budget} ms budget")
    log(f"{first} restarts and campaigns again")
    restarted = now_ms()
    fleet.start(first, cmds[first] + ["leader", first, KEY, str(ttl_ms), str(delay_ms)])
    while fleet.next_event(15, {"campaigning"}, since=restarted)[0] != first:
        pass
    time.sleep(1)

    log(f"SIGTERM {second}: it resigns, so no lock-delay applies")
    t_term = now_ms()
    MARKS.append((t_term, f"SIGTERM {second}"))
    fleet.procs[second].terminate()
    _, _, resigned = fleet.next_event(15, {"resigned"}, since=t_term)
    third, _, ev = fleet.next_event(15, {"leading"}, since=t_term)
    log(f"{third} leads, fencing token {ev['token']}: handoff {ev['t'] - resigned['t']} ms "
        f"after the resign")
    fleet.wait_exit(second)
    log(f"SIGTERM to the rest ({', '.join(fleet.procs)}): the leader resigns, the others stop")
    MARKS.append((now_ms(), "SIGTERM all"))
    for p in fleet.procs.values():
        p.terminate()
    for name in list(fleet.procs):
        fleet.wait_exit(name)


def semaphore_phase(fleet, cmds, ttl_ms, rounds=3, hold_ms=400):
    cmds = dict(cmds)
    if len(cmds) <= SEM_LIMIT:  # more workers than slots, or there is nothing to show
        cmds["c-2"] = cmds["c"]
    log(f"== semaphore {SEM_PREFIX}, limit {SEM_LIMIT}: {', '.join(cmds)} take turns "
        f"({rounds} jobs of {hold_ms} ms each)")
    for name, argv in cmds.items():
        fleet.start(name, argv + ["semaphore", name, SEM_PREFIX, str(SEM_LIMIT), str(rounds),
                                  str(hold_ms), str(ttl_ms)])
    # Events from different processes can arrive out of order: show them in time
    # order, each after a short delay.
    start = now_ms()
    pending, holders, most, done = [], set(), 0, set()
    seq = 0
    while len(done) < len(cmds):
        try:
            name, kind, ev = fleet.next_event(0.05, {"slot", "done"}, since=start)
            heapq.heappush(pending, (ev["t"], seq, name, kind, ev))
            seq += 1
        except Failure:
            pass
        while pending and pending[0][0] < now_ms() - 200:
            _, _, name, kind, ev = heapq.heappop(pending)
            if kind == "done":
                done.add(name)
                continue
            if ev["state"] == "acquired":
                holders.add(name)
                most = max(most, len(holders))
                log(f"{name:>6} got a slot      holders: {', '.join(sorted(holders))} "
                    f"({len(holders)}/{SEM_LIMIT})")
                if len(holders) > SEM_LIMIT:
                    raise Failure(f"{len(holders)} holders at once")
            else:
                holders.discard(name)
                log(f"{name:>6} gives it back   holders: {', '.join(sorted(holders)) or '-'}")
        if time.time() - T0 > 120:
            raise Failure("the semaphore phase did not finish")
    for name in list(cmds):
        fleet.wait_exit(name)
    log(f"never more than {most} holders at once (limit {SEM_LIMIT})")


def cleanup(addr, own_server):
    sessions = [s for s in http(addr, "GET", "/v1/session/list") or []
                if s.get("Name", "").startswith("demo-")]
    for s in sessions:
        http(addr, "PUT", f"/v1/session/destroy/{s['ID']}")
    http(addr, "DELETE", "/v1/kv/service/baton-demo?recurse")
    log(f"cleanup: {len(sessions)} demo sessions were left (destroyed), demo keys deleted"
        + ("" if own_server else f" on {addr}"))
    return len(sessions)


def print_metrics(fleet):
    """What each worker's client counted (its `@metrics` line at exit): the same numbers in
    every language, from the core (client.metrics(), baton_client_metrics)."""
    for t in fleet.readers:
        t.join(timeout=5)
    rows = [(name, ev) for name, kind, ev in fleet.record if kind == "metrics"]
    if not rows:
        return
    cols = ["acquired", "timed_out", "losses", "renewals", "renewals_failed", "requests", "refused_429"]
    log("== what each worker's client counted (client.metrics(); the killed leader never reported)")
    log(f"  {'worker':<8} {'phase':<10} " + "  ".join(cols))
    for name, ev in rows:
        log(f"  {name:<8} {ev.get('mode', ''):<10} " + "  ".join(f"{ev.get(c, '?'):>{len(c)}}" for c in cols))


def write_timeline(fleet):
    """target/demo/timeline.svg (and the events it was drawn from, timeline.json)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import timeline

    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "timeline.json"), "w", encoding="utf-8") as f:
        json.dump({"events": fleet.record, "marks": MARKS}, f)
    path = os.path.join(OUT, "timeline.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(timeline.render(fleet.record, MARKS))
    log(f"timeline: {os.path.relpath(path, ROOT)}")


def main():
    env = dict(os.environ)
    server = None
    if env.get("CONSUL_HTTP_ADDR"):
        addr = env["CONSUL_HTTP_ADDR"]
        ttl_ms, delay_ms = 10_000, 2_000  # Consul's smallest TTL is 10 s
        log(f"using the Consul at {addr}")
    else:
        server, addr = start_devserver()
        env["CONSUL_HTTP_ADDR"] = addr
        ttl_ms, delay_ms = 1_000, 1_000
        log(f"CONSUL_HTTP_ADDR is unset: started baton-devserver at {addr}")
    fleet = Fleet(env)
    cmds = worker_commands()
    ok = False
    try:
        leader_phase(fleet, cmds, ttl_ms, delay_ms)
        semaphore_phase(fleet, cmds, ttl_ms)
        ok = cleanup(addr, server is not None) == 0
        if not ok:
            log("FAILED: sessions were left behind")
    except Failure as e:
        log(f"FAILED: {e}")
    finally:
        fleet.stop_all()
        if server is not None:
            server.terminate()
            server.wait()
        print_metrics(fleet)
        write_timeline(fleet)
    log(f"demo {'finished' if ok else 'FAILED'} in {time.time() - T0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
