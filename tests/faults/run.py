#!/usr/bin/env python3
"""The fault harness (`make test-faults`, `make bench-faults`): see tests/faults/README.md.

Worker processes in Rust, C, Python and Node contend for one lock (and a semaphore), Rust ones
for a read-write lock and for a multi-key lock whose first key is the lock's, each through a fault
proxy of its own (`baton-devserver proxy`), while this script drives a fault schedule against the
holders of the moment or the whole server, then an external checker judges the logs:

1. believed-held intervals of different processes never overlap, except where the earlier
   holder was frozen (SIGSTOP) — the case fencing exists for — or the server lost all its state
   (a dev server restart: no client can know before it asks); both are counted apart;
2. the fenced counter has no lost update: the values of successful increments are distinct in
   each server epoch, every value up to the counter was written by an increment that reported
   success or an unknown outcome, and the final counter covers every success;
3. a holder cut off (partition, session destroyed, node failure, no leader) signals its loss
   before any other process acquires (the margin is reported), and within TTL of its last
   successful renew;
4. after each fault heals, some worker holds the lock within 2 x TTL + lock-delay + 1 s;
5. no session is left at the end.

The lock's checks (1)-(4) take the multi-key lock's holdings in with the plain lock's (they share
the key and the counter): no overlap between a multi-key holder and a single-key holder. The
read-write lock has its own (1)-(4): no writer overlaps any other holder, readers overlap freely
(counted), its writers' counter is fenced by their sequencers, a cut-off holder signals its loss
before the next holder it excludes acquires, and someone holds it again within the budget.

Stdlib only; builds nothing (the make targets build the dev server, the workers, the wheel and
the addon first). Times are CLOCK_MONOTONIC nanoseconds, shared by every process here.
"""

import argparse
import base64
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HERE = os.path.join(ROOT, "tests", "faults")

FAULTS = ("partition", "freeze", "kill", "restart", "noleader", "latency", "destroy", "nodefail")
# Faults after which the holder must have signalled its loss before anyone else acquired.
CUT_OFF = ("partition", "destroy", "nodefail", "noleader")


def mono_ns():
    return time.monotonic_ns()


class Failure(Exception):
    pass


def http(method, hostport, path, timeout=10):
    req = urllib.request.Request(f"http://{hostport}{path}", method=method,
                                 data=b"" if method == "PUT" else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def put_ok(hostport, path):
    status, body = http("PUT", hostport, path)
    if status != 200:
        raise Failure(f"PUT {path}: HTTP {status} {body[:200]!r}")


def start_line(argv, prefix, logdir, name):
    err = open(os.path.join(logdir, f"{name}.stderr"), "w")
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    line = p.stdout.readline().strip()
    if not line.startswith(prefix):
        p.kill()
        raise Failure(f"{name} did not start: {line!r}")
    threading.Thread(target=p.stdout.read, daemon=True).start()
    return p, line


class Worker:
    """One worker process: its stdout events go to `events` as (name, kind, fields)."""

    def __init__(self, slot, mode, name, argv, env, logdir):
        self.slot, self.mode, self.name = slot, mode, name
        self.err = open(os.path.join(logdir, f"{name}.stderr"), "w")
        self.out_path = os.path.join(logdir, f"{name}.stdout")
        self.p = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, text=True, bufsize=1)
        self.events = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        with open(self.out_path, "w") as log:
            for line in self.p.stdout:
                log.write(line)
                log.flush()
                ev = parse_line(line)
                if ev:
                    self.events.append(ev)

    def quit(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except (BrokenPipeError, OSError):
            pass


def last_start_or_end(w):
    """A worker's last @start or @end event (a holder's @inc lines come between), or None."""
    return next((e for e in reversed(w.events) if e[0] in ("start", "end")), None)


def parse_line(line):
    line = line.strip()
    if not line.startswith("@"):
        return None
    head, _, rest = line[1:].partition(" ")
    fields = {}
    for part in rest.split(" "):
        k, eq, v = part.partition("=")
        if eq:
            fields[k] = v
        elif fields:
            # A free-text field (what=...) with spaces: keep it whole.
            last = list(fields)[-1]
            fields[last] += " " + part
    return head, fields


class Run:
    def __init__(self, args):
        self.args = args
        self.ttl_ns = args.ttl_ms * 1_000_000
        self.ld_ns = args.lock_delay_ms * 1_000_000
        self.budget_ns = 2 * self.ttl_ns + self.ld_ns + 1_000_000_000
        self.logdir = args.logdir or tempfile.mkdtemp(prefix="baton-faults-")
        os.makedirs(self.logdir, exist_ok=True)
        self.run_id = os.getpid()
        self.key = f"faults/{self.run_id}/lock"
        self.counter = f"faults/{self.run_id}/counter"
        self.pool = f"faults/{self.run_id}/pool"
        self.rw = f"faults/{self.run_id}/rw"
        self.rw_counter = f"faults/{self.run_id}/rw-counter"
        # The multi-key lock's keys: the lock's key (shared with the plain lock's workers), then
        # keys of its own.
        self.multi_keys = [self.key] + [f"faults/{self.run_id}/multi/{i}"
                                        for i in range(1, args.multi_keys)]
        # One slot per worker process: (language, mode) with mode "lock", "sem", "read",
        # "write" or "multi"; a killed worker's replacement takes its slot (and its proxy).
        self.slots = ([(l, "lock") for l in args.langs] + [(l, "sem") for l in args.sem_langs]
                      + [("rust", "read")] * args.readers + [("rust", "write")] * args.writers
                      + [("rust", "multi")] * args.multi)
        self.workers = {}  # name -> Worker
        self.proxies = {}  # slot -> (process, addr, control)
        self.seq = {}      # lang -> replacement count
        self.kills, self.freezes, self.restarts, self.episodes = {}, [], [], []
        self.server = None
        self.addr = None

    # ---- processes ------------------------------------------------------------------------
    def bin(self, name):
        return os.path.join(ROOT, "target", self.args.profile, name)

    def start(self):
        self.server, line = start_line(
            [self.bin("baton-devserver"), "--port", "0", "--session-ttl-min", "100ms"],
            "BATON_DEVSERVER_ADDR=", self.logdir, "devserver")
        self.addr = line.split("=", 1)[1]
        for slot, _ in enumerate(self.slots):
            p, line = start_line([self.bin("baton-devserver"), "proxy", "--to", self.addr],
                                 "BATON_PROXY_ADDR=", self.logdir, f"proxy-{slot}")
            f = dict(part.split("=", 1) for part in line.split())
            self.proxies[slot] = (p, f["BATON_PROXY_ADDR"], f["BATON_PROXY_CONTROL"])
            self.spawn(slot)

    def argv(self, lang):
        return {
            "rust": [self.bin("faults-worker")],
            "c": [os.path.join(ROOT, "target", "faults", "worker-c")],
            "python": [sys.executable, os.path.join(HERE, "worker.py")],
            "node": ["node", os.path.join(HERE, "worker.js")],
        }[lang]

    def spawn(self, slot):
        lang, mode = self.slots[slot]
        tag = lang if mode == "lock" else f"{lang}-{mode}"
        n = self.seq.get(tag, 0) + 1
        self.seq[tag] = n
        name = f"{tag}-{n}"
        env = dict(os.environ, CONSUL_HTTP_ADDR=self.proxies[slot][1])
        env.pop("CONSUL_HTTP_TOKEN", None)
        common = [str(self.args.ttl_ms), str(self.args.lock_delay_ms)]
        if mode == "lock":
            args = [name, self.key, self.counter] + common
        elif mode == "sem":
            args = [name, self.pool, self.counter] + common + [str(self.args.limit)]
        elif mode in ("read", "write"):
            args = [name, self.rw, self.rw_counter] + common + [mode]
        else:
            args = ([name, self.key, self.counter] + common
                    + ["multi=" + ",".join(self.multi_keys[1:])])
        self.workers[name] = Worker(slot, mode, name, self.argv(lang) + args, env, self.logdir)

    def proxy(self, slot, path):
        put_ok(self.proxies[slot][2], path)

    def stop(self):
        for w in self.workers.values():
            if w.p.poll() is None:
                w.quit()
        deadline = time.monotonic() + 20
        problems = []
        for w in self.workers.values():
            try:
                w.p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.p.kill()
                w.p.wait()
                problems.append(f"{w.name} did not exit within 20 s of quit")
            if w.name not in self.kills and w.p.returncode != 0:
                problems.append(f"{w.name} exited with {w.p.returncode} "
                                f"(stderr: {self.logdir}/{w.name}.stderr)")
            w.reader.join(timeout=5)
        return problems

    def shutdown(self):
        for w in self.workers.values():
            if w.p.poll() is None:
                w.p.kill()
        for p, _, _ in self.proxies.values():
            p.terminate()
        if self.server:
            self.server.terminate()
            self.server.wait()
        for p, _, _ in self.proxies.values():
            p.wait()

    # ---- the server's view -----------------------------------------------------------------
    def holder(self):
        """(worker name, session) holding the key now, or None."""
        try:
            status, body = http("GET", self.addr, f"/v1/kv/{self.key}", timeout=2)
        except OSError:
            return None
        if status != 200:
            return None
        entry = json.loads(body)[0]
        if not entry.get("Session"):
            return None
        name = base64.b64decode(entry.get("Value") or "").decode()
        return name, entry["Session"]

    def wait_fresh_holder(self, timeout_s, fresh_ns=80_000_000, prefer=None, prefer_s=0):
        """A holder of the lock's key (a plain lock's or the multi-key lock's worker) that
        acquired less than `fresh_ns` ago by its own log (a holding lasts 200 ms: a fault must
        land while it is on, before its first increment), as the server also shows it; for
        the first `prefer_s` seconds, only one of mode `prefer`."""
        start = time.monotonic()
        end = start + timeout_s
        while time.monotonic() < end:
            now = mono_ns()
            modes = ("lock", "multi")
            if prefer and time.monotonic() < start + prefer_s:
                modes = (prefer,)
            for name, w in list(self.workers.items()):
                if w.mode not in modes:
                    continue
                last = w.events[-1] if w.events else None
                if last and last[0] == "start" and now - int(last[1]["t"]) < fresh_ns \
                        and w.p.poll() is None:
                    h = self.holder()
                    if h and h[0] == name:
                        return h
            time.sleep(0.005)
        return None

    def wait_holder(self, timeout_s, not_session=None):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            h = self.holder()
            if h and h[1] != not_session and h[0] in self.workers \
                    and self.workers[h[0]].p.poll() is None:
                return h
            time.sleep(0.02)
        return None

    def sessions(self):
        status, body = http("GET", self.addr, "/v1/session/list", timeout=5)
        return json.loads(body) if status == 200 else None

    # ---- the schedule ---------------------------------------------------------------------
    def slot_holder(self, modes=("sem",)):
        """A worker of one of `modes` holding now by its own log (the freshest), or None."""
        best = None
        for w in self.workers.values():
            if w.mode not in modes or w.p.poll() is not None:
                continue
            last = last_start_or_end(w)
            if last and last[0] == "start":
                if best is None or int(last[1]["t"]) > best[0]:
                    best = (int(last[1]["t"]), w, last[1]["session"])
        return best and (best[1], best[2])

    def episode(self, kind, multi=False, reader=False):
        ttl_s, ld_s = self.args.ttl_ms / 1000, self.args.lock_delay_ms / 1000
        # With `multi`, it waits a little (1 s) for a multi-key holder of the lock's key first,
        # so that the faults often hit the multi-key lock.
        h = self.wait_fresh_holder(3 * (2 * ttl_s + ld_s) + 5,
                                   prefer="multi" if multi else None, prefer_s=1)
        if h is None:
            raise Failure(f"nobody held the lock before the {kind} episode "
                          f"(logs: {self.logdir})")
        name, session = h
        # The same fault hits the lock's holder, a semaphore slot's holder and a holder of the
        # read-write lock (a writer, or with `reader` a reader, if one holds) at once.
        targets = [(self.workers[name], session)]
        sem = self.slot_holder()
        if sem:
            targets.append(sem)
        order = ("read", "write") if reader else ("write", "read")
        rw = self.slot_holder((order[0],)) or self.slot_holder((order[1],))
        if rw:
            targets.append(rw)
        long_cut = 2 * ttl_s + ld_s + 0.5
        start = mono_ns()
        if kind == "partition":
            for w, _ in targets:
                self.proxy(w.slot, "/_proxy/blackhole")
            time.sleep(long_cut)
            for w, _ in targets:
                self.proxy(w.slot, "/_proxy/heal")
        elif kind == "freeze":
            for w, _ in targets:
                os.kill(w.p.pid, signal.SIGSTOP)
            t0 = mono_ns()
            time.sleep(long_cut)
            for w, _ in targets:
                os.kill(w.p.pid, signal.SIGCONT)
            self.freezes += [(w.name, t0, mono_ns()) for w, _ in targets]
        elif kind == "kill":
            for w, _ in targets:
                os.kill(w.p.pid, signal.SIGKILL)
                self.kills[w.name] = mono_ns()
            for w, _ in targets:
                w.p.wait()
                self.spawn(w.slot)
        elif kind == "restart":
            t0 = mono_ns()
            put_ok(self.addr, "/_devserver/restart")
            self.restarts.append((t0, mono_ns()))
        elif kind == "noleader":
            put_ok(self.addr, "/_devserver/leader?present=false")
            time.sleep(1.5 * ttl_s)
            put_ok(self.addr, "/_devserver/leader?present=true")
        elif kind == "latency":
            for w, _ in targets:
                self.proxy(w.slot, f"/_proxy/delay?d={self.args.ttl_ms // 3}ms")
            time.sleep(2 * ttl_s)
            for w, _ in targets:
                self.proxy(w.slot, "/_proxy/heal")
        elif kind == "destroy":
            for _, sid in targets:
                put_ok(self.addr, f"/v1/session/destroy/{sid}")
        elif kind == "nodefail":
            put_ok(self.addr, "/_devserver/node/fail")
            time.sleep(0.5)
            put_ok(self.addr, "/_devserver/node/heal")
        else:
            raise Failure(f"unknown fault {kind}")
        healed = mono_ns()
        self.episodes.append({"kind": kind, "holder": name, "session": session,
                              "holder_mode": self.workers[name].mode,
                              "sem_holder": sem[0].name if sem else None,
                              "rw_holder": rw[0].name if rw else None,
                              "rw_mode": rw[0].mode if rw else None,
                              "start": start, "healed": healed})
        # Let the fault's effects play out before the next one: someone holds again (checked
        # from the logs against the budget later), then a little quiet.
        self.wait_holder(self.budget_ns / 1e9 + 2,
                         not_session=session if kind != "latency" else None)
        time.sleep(0.2)

    def final_counter(self, key=None):
        status, body = http("GET", self.addr, f"/v1/kv/{key or self.counter}?raw", timeout=5)
        if status == 404:
            return 0
        return int(body.decode().strip() or 0)

    def wait_no_sessions(self):
        """Sessions of killed workers expire by themselves (at most 2 x TTL after their last
        renew); wait that long, then report what is left."""
        end = time.monotonic() + 2 * self.args.ttl_ms / 1000 + 3
        left = self.sessions()
        while left and time.monotonic() < end:
            time.sleep(0.1)
            left = self.sessions()
        return left or []


# ---- the checker -----------------------------------------------------------------------------

def intervals(logs, kills, run_end):
    """Believed-held intervals: (start, end, process, token, why, deadline)."""
    out, problems = [], []
    for name, events in logs.items():
        open_ = None
        for kind, f in events:
            if kind == "start":
                if open_ is not None:
                    problems.append(f"{name}: @start token={f.get('token')} before the @end "
                                    f"of token={open_[1]}")
                open_ = (int(f["t"]), int(f["token"]))
            elif kind == "end":
                if open_ is None or int(f["token"]) != open_[1]:
                    problems.append(f"{name}: @end token={f.get('token')} without its @start")
                    continue
                out.append((open_[0], int(f["t"]), name, open_[1], f["why"],
                            int(f.get("deadline", 0))))
                open_ = None
        if open_ is not None:
            if name in kills:
                out.append((open_[0], kills[name], name, open_[1], "killed", 0))
            else:
                problems.append(f"{name}: holding token={open_[1]} never ended")
                out.append((open_[0], run_end, name, open_[1], "open", 0))
    out.sort()
    return out, problems


def overlaps(ivs, freezes, restarts, what, role=lambda name: "", exclusive=lambda a, b: True):
    """Check (1) over sorted intervals of one key or lock `what`: no two processes' intervals
    overlap when `exclusive(a, b)` (both are names), except where the earlier holder was frozen
    or a restart fell between the two starts. Returns (problems, frozen, state_loss, shared):
    the excused holdings, and how many non-exclusive pairs (readers) did overlap."""
    problems, frozen, state_loss, shared = [], set(), set(), 0
    active = []  # intervals that have not ended by the current one's start
    for iv in ivs:
        active = [a for a in active if a[1] > iv[0]]
        for prev in active:
            if prev[2] == iv[2]:
                continue
            if not exclusive(prev[2], iv[2]):
                shared += 1
            elif any(n == prev[2] and t0 <= iv[0] and t1 >= prev[0] for n, t0, t1 in freezes):
                frozen.add((prev[2], prev[3]))
            elif any(prev[0] <= r0 <= iv[0] for r0, _ in restarts):
                state_loss.add((prev[2], prev[3]))
            else:
                problems.append(f"overlap{what}: {prev[2]}{role(prev[2])} held token {prev[3]} "
                                f"until {prev[1]} ({prev[4]}), {iv[2]}{role(iv[2])} acquired "
                                f"token {iv[3]} at {iv[0]} ({(prev[1] - iv[0]) / 1e6:.1f} ms "
                                f"before)")
        active.append(iv)
    return problems, frozen, state_loss, shared


def counter_check(logs, restarts, final_counter, what=""):
    """Check (2), the fenced counter, epoch by epoch (a restart loses the counter with
    everything else). Returns (problems, lost updates, successful increments)."""
    problems, lost_updates = [], 0
    bounds = sorted(restarts)

    def epoch_of(t):
        for i, (r0, r1) in enumerate(bounds):
            if t < r0:
                return i
            if t <= r1 + 200_000_000:
                return None  # acknowledged around a restart: either side
        return len(bounds)

    epochs, around = {}, set()
    for name, events in logs.items():
        for kind, f in events:
            if kind in ("inc", "incunk"):
                e = epoch_of(int(f["t"]))
                if e is None:
                    around.add(int(f["value"]))
                    continue
                ok, unk = epochs.setdefault(e, ([], set()))
                (ok.append((int(f["value"]), name)) if kind == "inc"
                 else unk.add(int(f["value"])))
    incs = 0
    last = len(bounds)
    for e, (ok, unk) in sorted(epochs.items()):
        incs += len(ok)
        seen = {}
        for v, name in ok:
            if v in seen:
                lost_updates += 1
                problems.append(f"{what}lost update: value {v} written by {seen[v]} and {name} "
                                f"(epoch {e})")
            seen[v] = name
        top = max([v for v, _ in ok] + [final_counter if e == last else 0])
        written = set(seen) | unk | around
        missing = [v for v in range(1, top + 1) if v not in written]
        if missing and e == last:
            problems.append(f"{what}counter values nobody wrote: {missing[:10]} (epoch {e})")
        if e == last:
            over = [v for v in seen if v > final_counter]
            if over:
                lost_updates += len(over)
                problems.append(f"{what}lost update: final counter {final_counter} below "
                                f"successful increments {sorted(over)[:10]}")
    if last not in epochs and final_counter:
        problems.append(f"{what}counter is {final_counter} but no increment was logged after the "
                        f"last restart")
    return problems, lost_updates, incs


def loss_check(ivs, episodes, holder_field, ttl_ns, what="", exclusive=lambda a, b: True):
    """Check (3): the holder an episode cut off (`episode[holder_field]`) signals its loss before
    any other process whose holding excludes its own acquires, and within TTL of its last
    renew. Returns (problems, signalled before, cut off, margins in ms)."""
    problems, margins, before, cut = [], [], 0, 0
    for ep in episodes:
        who = ep.get(holder_field)
        if ep["kind"] not in CUT_OFF or not who:
            continue
        mine = [iv for iv in ivs if iv[2] == who and iv[0] <= ep["start"] <= iv[1]]
        if not mine:
            continue  # released before the fault took hold
        iv = mine[0]
        if iv[4] == "released" and iv[1] <= ep["start"]:
            continue
        cut += 1
        nxt = [o for o in ivs if o[2] != iv[2] and o[0] >= iv[0] and o[0] >= ep["start"]
               and exclusive(iv[2], o[2])]
        nxt = min(nxt, default=None)
        if nxt is None or iv[1] < nxt[0]:
            before += 1
            if nxt is not None:
                margins.append((nxt[0] - iv[1]) / 1e6)
        else:
            problems.append(f"{what}{ep['kind']}: {iv[2]} learnt of its loss at {iv[1]}, after "
                            f"{nxt[2]} acquired at {nxt[0]}")
        if iv[4] == "lost" and iv[5] and iv[1] > iv[5] + ttl_ns // 10:
            problems.append(f"{what}{ep['kind']}: {iv[2]} signalled its loss "
                            f"{(iv[1] - iv[5]) / 1e6:.1f} ms after its lease deadline, later "
                            f"than TTL after its last successful renew")
    return problems, before, cut, margins


def liveness(ivs, episodes, ttl_ns, lock_delay_ns, what="nobody held the lock"):
    """Check (4): someone holds within 2 x TTL + lock-delay + 1 s of each heal."""
    budget = 2 * ttl_ns + lock_delay_ns + 1_000_000_000
    return [f"{ep['kind']} episode (healed at {ep['healed']}): {what} within "
            f"{budget / 1e9:.1f} s"
            for ep in episodes
            if not any(iv[0] <= ep["healed"] + budget and iv[1] >= ep["healed"] for iv in ivs)]


def check(logs, kills, freezes, restarts, episodes, final_counter, sessions_left,
          ttl_ns, lock_delay_ns, run_end, multi=()):
    """Returns (problems, figures). problems: every violation of (1)-(5) and lost update.

    `logs` are those of every process that contends for the lock's key: the plain lock's
    workers and the multi-key lock's (`multi`, their names), whose holdings take that key
    with the others; so (1) is also "no overlap between a multi-key holder and a single-key
    holder", and (2) covers the increments of both, each fenced by its sequencer of the key."""
    problems = []
    ivs, p = intervals(logs, kills, run_end)
    problems += p
    multi = set(multi)

    def role(name):
        return " (multi-key lock)" if name in multi else " (lock)" if multi else ""

    # (1) No overlap but frozen or state-loss ones.
    p, frozen, state_loss, _ = overlaps(ivs, freezes, restarts,
                                        " on the lock's key" if multi else "", role)
    problems += p
    # (2) The fenced counter.
    p, lost_updates, incs = counter_check(logs, restarts, final_counter)
    problems += p
    # (3) A cut-off holder signals loss before the next holder, within TTL of its last renew.
    p, before, cut, margins = loss_check(ivs, episodes, "holder", ttl_ns)
    problems += p
    # (4) Someone holds within 2 x TTL + lock-delay + 1 s of each heal.
    problems += liveness(ivs, episodes, ttl_ns, lock_delay_ns)
    # (5) No session left.
    for s in sessions_left:
        problems.append(f"session left at the end: {s.get('ID')} ({s.get('Name')})")

    # Hand-overs between a multi-key holder and a single-key holder: proof they contended.
    swaps = sum(1 for a, b in zip(ivs, ivs[1:]) if (a[2] in multi) != (b[2] in multi))
    figures = {
        "episodes": len(episodes), "holdings": len(ivs), "increments": incs,
        "lost_updates": lost_updates, "frozen": len(frozen), "state_loss": len(state_loss),
        "before": before, "cut": cut, "margins": margins,
        "fenced": sum(1 for ev in logs.values() for k, _ in ev if k == "fenced"),
        "unknown": sum(1 for ev in logs.values() for k, _ in ev if k == "incunk"),
        "multi_holdings": sum(1 for iv in ivs if iv[2] in multi),
        "multi_swaps": swaps,
    }
    return problems, figures


def check_rw(logs, modes, kills, freezes, restarts, episodes, final_counter, ttl_ns,
             lock_delay_ns, run_end):
    """The read-write lock's checks. `modes`: process name -> "read" or "write".
    (1) no writer's interval overlaps any other process's (reader or writer), frozen holders and
    a lost server state aside, while readers overlap freely (counted); (2) the writers' fenced
    counter; (3) a cut-off holder (`rw_holder`) signals its loss before the next holder it
    excludes (any, for a writer; a writer, for a reader) acquires, within TTL of its last renew;
    (4) someone holds the lock within the budget after each heal. Returns (problems, figures)."""
    problems = []
    ivs, p = intervals(logs, kills, run_end)
    problems += p

    def exclusive(a, b):
        return modes[a] == "write" or modes[b] == "write"

    def role(name):
        return f" ({'writer' if modes[name] == 'write' else 'reader'})"

    p, frozen, state_loss, shared = overlaps(ivs, freezes, restarts, " on the read-write lock",
                                             role, exclusive)
    problems += p
    writers = {n: ev for n, ev in logs.items() if modes[n] == "write"}
    p, lost_updates, incs = counter_check(writers, restarts, final_counter, "read-write lock: ")
    problems += p
    p, before, cut, margins = loss_check(ivs, episodes, "rw_holder", ttl_ns, "read-write lock: ",
                                         exclusive)
    problems += p
    if ivs:
        problems += liveness(ivs, episodes, ttl_ns, lock_delay_ns,
                             "nobody held the read-write lock")
    return problems, {
        "holdings": len(ivs), "writes": sum(1 for iv in ivs if modes[iv[2]] == "write"),
        "shared": shared, "frozen": len(frozen), "state_loss": len(state_loss),
        "increments": incs, "lost_updates": lost_updates, "before": before, "cut": cut,
        "margins": margins,
        "fenced": sum(1 for ev in writers.values() for k, _ in ev if k == "fenced"),
        "unknown": sum(1 for ev in writers.values() for k, _ in ev if k == "incunk"),
    }


def check_sem(logs, kills, freezes, restarts, episodes, limit, ttl_ns, lock_delay_ns, run_end):
    """The semaphore's share of (1) and (4): never more than `limit` believed-held slots at
    once (but for frozen holders and a server that lost its state), and some slot held again
    within the budget after each heal. Returns (problems, figures)."""
    ivs, problems = intervals(logs, kills, run_end)
    frozen, state_loss, most = set(), set(), 0
    active = []
    for iv in ivs:
        active = [a for a in active if a[1] > iv[0]]
        if len(active) + 1 > limit:
            excused = set()
            for a in active:
                if any(n == a[2] and t0 <= iv[0] and t1 >= a[0] for n, t0, t1 in freezes):
                    excused.add(("frozen", a[2], a[3]))
                elif any(a[0] <= r0 <= iv[0] for r0, _ in restarts):
                    excused.add(("state", a[2], a[3]))
            if len(active) + 1 - len(excused) > limit:
                problems.append(f"semaphore: {len(active) + 1} slots believed held at once "
                                f"(limit {limit}) when {iv[2]} acquired at {iv[0]}: "
                                + ", ".join(f"{a[2]} since {a[0]}" for a in active))
            frozen |= {(n, t) for k, n, t in excused if k == "frozen"}
            state_loss |= {(n, t) for k, n, t in excused if k == "state"}
        active.append(iv)
        most = max(most, len(active))
    budget = 2 * ttl_ns + lock_delay_ns + 1_000_000_000
    if ivs:
        for ep in episodes:
            h = ep["healed"]
            if not any(iv[0] <= h + budget and iv[1] >= h for iv in ivs):
                problems.append(f"semaphore: {ep['kind']} episode (healed at {h}): no slot "
                                f"held within {budget / 1e9:.1f} s")
    return problems, {"holdings": len(ivs), "most": most, "frozen": len(frozen),
                      "state_loss": len(state_loss)}


def summary(problems, fig):
    m = fig["margins"]
    p50 = f"{statistics.median(m):.0f}" if m else "-"
    low = f"{min(m):.0f}" if m else "-"
    return (f"faults: {fig['episodes']} episodes, violations: {len(problems)}, "
            f"lost updates: {fig['lost_updates']}, frozen overlaps: {fig['frozen']}, "
            f"loss before next holder: {fig['before']}/{fig['cut']}, "
            f"detection margin p50 {p50}ms min {low}ms")


def self_test():
    """Each of (1)-(5) must be able to fail: feed the checker crafted bad logs."""
    ms = 1_000_000
    ttl, ld = 1000 * ms, 500 * ms

    def ev(kind, t, **f):
        return (kind, dict(t=str(t), **{k: str(v) for k, v in f.items()}))

    def good():
        return {
            "a": [ev("start", 0, token=10), ev("inc", 10 * ms, value=1),
                  ev("end", 100 * ms, token=10, why="released", deadline=0),
                  ev("start", 1000 * ms, token=12), ev("inc", 1010 * ms, value=3),
                  ev("end", 1500 * ms, token=12, why="lost", deadline=1450 * ms)],
            "b": [ev("start", 200 * ms, token=11), ev("inc", 210 * ms, value=2),
                  ev("end", 300 * ms, token=11, why="released", deadline=0),
                  ev("start", 2500 * ms, token=13), ev("inc", 2510 * ms, value=4),
                  ev("end", 2600 * ms, token=13, why="released", deadline=0)],
        }
    eps = [{"kind": "partition", "holder": "a", "session": "s", "start": 1200 * ms,
            "healed": 2000 * ms}]

    def run(logs, final=4, kills=None, freezes=(), restarts=(), sessions=(), episodes=eps,
            multi=()):
        return check(logs, kills or {}, list(freezes), list(restarts), episodes, final,
                     list(sessions), ttl, ld, 10_000 * ms, multi)

    problems, fig = run(good())
    assert problems == [], problems
    assert fig["before"] == 1 and fig["margins"] == [1000.0], fig
    # (1) b acquires while a still believes it holds.
    bad = good()
    bad["b"][3] = ev("start", 1400 * ms, token=13)
    assert any(p.startswith("overlap") for p in run(bad)[0]), run(bad)[0]
    # ... which is only counted when a was frozen then.
    problems, fig = run(bad, freezes=[("a", 1100 * ms, 1450 * ms)])
    assert fig["frozen"] == 1 and not any(p.startswith("overlap") for p in problems), problems
    # ... but not an overlap of two others that happens meanwhile.
    bad["b"].append(ev("start", 1420 * ms, token=14))
    bad["b"].append(ev("end", 1430 * ms, token=14, why="released", deadline=0))
    bad["c"] = [ev("start", 1425 * ms, token=15), ev("end", 1426 * ms, token=15,
                                                      why="released", deadline=0)]
    problems, fig = run(bad, freezes=[("a", 1100 * ms, 1450 * ms)])
    assert any(p.startswith("overlap: b") for p in problems), problems
    # (2) two successful increments wrote the same value: a lost update.
    bad = good()
    bad["b"][4] = ev("inc", 2510 * ms, value=3)
    problems, fig = run(bad, final=3)
    assert fig["lost_updates"] == 1 and any("lost update" in p for p in problems), problems
    # ... and a final counter below a successful increment.
    problems, fig = run(good(), final=3)
    assert fig["lost_updates"] == 1, problems
    # (3) the cut-off holder learns of its loss only after the next holder acquired...
    bad = good()
    bad["a"][5] = ev("end", 2550 * ms, token=12, why="lost", deadline=1450 * ms)
    assert any("after b acquired" in p for p in run(bad)[0]), run(bad)[0]
    # ... or later than TTL after its last renew (deadline + margin).
    bad = good()
    bad["a"][5] = ev("end", 1600 * ms, token=12, why="lost", deadline=1450 * ms)
    assert any("after its lease deadline" in p for p in run(bad)[0]), run(bad)[0]
    # (4) nobody holds within the budget after a heal.
    late = [dict(eps[0], healed=2500 * ms + 100 * ms)]
    bad = good()
    bad["b"][3] = ev("start", 6300 * ms, token=13)
    bad["b"][4] = ev("inc", 6310 * ms, value=4)
    bad["b"][5] = ev("end", 6400 * ms, token=13, why="released", deadline=0)
    assert any("nobody held" in p for p in run(bad, episodes=late)[0]), run(bad, episodes=late)[0]
    # (5) a session left behind.
    assert any("session left" in p for p in run(good(), sessions=[{"ID": "x", "Name": "n"}])[0])
    # A holding that never ends, and an unknown write nobody can explain.
    bad = good()
    del bad["b"][5]
    assert any("never ended" in p for p in run(bad)[0])
    assert any("nobody wrote" in p for p in run(good(), final=6)[0])
    # The semaphore: three slots believed held at once under a limit of 2 ...
    sem = {
        "x": [ev("start", 0, token=1), ev("end", 100 * ms, token=1, why="released", deadline=0)],
        "y": [ev("start", 10 * ms, token=1), ev("end", 90 * ms, token=1, why="released",
                                                    deadline=0)],
        "z": [ev("start", 20 * ms, token=1), ev("end", 30 * ms, token=1, why="released",
                                                    deadline=0)],
    }
    problems, fig = check_sem(sem, {}, [], [], [], 2, ttl, ld, 10_000 * ms)
    assert any("3 slots believed held" in p for p in problems), problems
    # ... unless one of them was frozen then;
    problems, fig = check_sem(sem, {}, [("x", 5 * ms, 50 * ms)], [], [], 2, ttl, ld, 10_000 * ms)
    assert problems == [] and fig["frozen"] == 1, (problems, fig)
    # and no slot held within the budget after a heal.
    early = [{"kind": "partition", "healed": 50 * ms}]
    problems, _ = check_sem(sem, {}, [], [], early, 3, ttl, ld, 10_000 * ms)
    assert problems == [], problems
    late = [{"kind": "partition", "healed": 200 * ms}]
    problems, _ = check_sem(sem, {}, [], [], late, 3, ttl, ld, 10_000 * ms)
    assert any("no slot held" in p for p in problems), problems
    # The multi-key lock shares the lock's key: a multi-key holding overlapping a single-key
    # one is an overlap on that key, whichever came first ...
    mixed = good()
    mixed["m"] = [ev("start", 50 * ms, token=9), ev("end", 150 * ms, token=9, why="lost",
                                                    deadline=0)]
    problems, fig = run(mixed, multi=["m"])
    assert any(p.startswith("overlap on the lock's key: a (lock)") and "m (multi-key lock)" in p
               for p in problems), problems
    mixed["m"] = [ev("start", 350 * ms, token=9), ev("inc", 360 * ms, value=5),
                  ev("end", 450 * ms, token=9, why="released", deadline=0)]
    mixed["a"][0] = ev("start", 400 * ms, token=10)
    problems, fig = run(mixed, final=5, multi=["m"])
    assert any(p.startswith("overlap on the lock's key: m (multi-key lock)")
               and "a (lock) acquired" in p for p in problems), problems
    # ... and hand-overs between them are counted (the proof they contended), not held against
    # them; the multi-key holder's increments count with the others'.
    mixed["a"][0] = ev("start", 0, token=10)
    problems, fig = run(mixed, final=5, multi=["m"])
    assert problems == [] and fig["multi_holdings"] == 1 and fig["multi_swaps"] == 2, \
        (problems, fig)
    # The read-write lock: readers overlap freely (counted) ...
    rw = {
        "r1": [ev("start", 0, token=1), ev("end", 200 * ms, token=1, why="released", deadline=0)],
        "r2": [ev("start", 50 * ms, token=2), ev("end", 250 * ms, token=2, why="released",
                                                      deadline=0)],
        "w1": [ev("start", 300 * ms, token=3), ev("inc", 310 * ms, value=1),
               ev("end", 500 * ms, token=3, why="released", deadline=0)],
        "w2": [ev("start", 600 * ms, token=4), ev("inc", 610 * ms, value=2),
               ev("end", 800 * ms, token=4, why="released", deadline=0)],
    }
    modes = {"r1": "read", "r2": "read", "r3": "read", "w1": "write", "w2": "write"}

    def run_rw(logs, final=2, freezes=(), episodes=()):
        return check_rw(logs, modes, {}, list(freezes), [], list(episodes), final, ttl, ld,
                        10_000 * ms)

    problems, fig = run_rw(rw)
    assert problems == [] and fig["shared"] == 1 and fig["writes"] == 2, (problems, fig)
    # ... but a writer overlapping a reader ...
    bad = {k: list(v) for k, v in rw.items()}
    bad["w1"][0] = ev("start", 240 * ms, token=3)
    problems, _ = run_rw(bad)
    assert any(p.startswith("overlap on the read-write lock: r2 (reader)")
               and "w1 (writer) acquired" in p for p in problems), problems
    # ... (unless that reader was frozen then) ...
    problems, fig = run_rw(bad, freezes=[("r2", 100 * ms, 260 * ms)])
    assert problems == [] and fig["frozen"] == 1, (problems, fig)
    # ... or another writer is caught,
    bad = {k: list(v) for k, v in rw.items()}
    bad["w2"][0] = ev("start", 450 * ms, token=4)
    problems, _ = run_rw(bad)
    assert any(p.startswith("overlap on the read-write lock: w1 (writer)")
               and "w2 (writer) acquired" in p for p in problems), problems
    # as are two writers' increments of one value,
    bad = {k: list(v) for k, v in rw.items()}
    bad["w2"][1] = ev("inc", 610 * ms, value=1)
    problems, fig = run_rw(bad, final=1)
    assert fig["lost_updates"] == 1 and any(p.startswith("read-write lock: lost update")
                                            for p in problems), problems
    # and a cut-off reader learning of its loss only after a writer acquired (another reader
    # acquiring meanwhile is no fault), and nobody holding within the budget after a heal.
    cut = [{"kind": "destroy", "rw_holder": "r2", "start": 100 * ms, "healed": 100 * ms}]
    bad = {k: list(v) for k, v in rw.items()}
    bad["r2"][1] = ev("end", 320 * ms, token=2, why="lost", deadline=1000 * ms)
    bad["w1"][0] = ev("start", 330 * ms, token=3)
    bad["r3"] = [ev("start", 150 * ms, token=5), ev("end", 250 * ms, token=5, why="released",
                                                       deadline=0)]
    problems, fig = run_rw(bad, episodes=cut)
    assert problems == [] and (fig["before"], fig["cut"]) == (1, 1), (problems, fig)
    bad["w1"][0] = ev("start", 310 * ms, token=3)
    problems, _ = run_rw(bad, episodes=cut)
    assert any(p.startswith("read-write lock: destroy: r2 learnt of its loss")
               for p in problems), problems
    late = [{"kind": "partition", "rw_holder": None, "start": 0, "healed": 5000 * ms}]
    problems, _ = run_rw(rw, episodes=late)
    assert any("nobody held the read-write lock" in p for p in problems), problems
    print("faults checker: self-test passed ((1) overlap, frozen overlap counted apart, (2) lost "
          "updates, (3) loss after the next holder and past the lease, (4) no holder within the "
          "budget, (5) session left, the semaphore's limit and liveness, a multi-key holder "
          "overlapping a single-key one on their shared key, a read-write lock's writer "
          "overlapping a reader or a writer (readers sharing allowed), its lost updates, late "
          "loss and liveness, plus unended holdings and unexplained counter values are all "
          "caught)")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--self-test", action="store_true", help="check the checker, then exit")
    ap.add_argument("--episodes", type=int, default=16, help="fault episodes (default 16)")
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help=f"comma-separated, in rotation (default {','.join(FAULTS)})")
    ap.add_argument("--langs", default="rust,c,python,node",
                    help="languages of the lock's workers, one worker each")
    ap.add_argument("--sem-langs", default="rust,c,python,node",
                    help="languages of the semaphore's workers (empty: none)")
    ap.add_argument("--limit", type=int, default=2, help="the semaphore's limit (default 2)")
    ap.add_argument("--readers", type=int, default=2,
                    help="Rust workers reading the read-write lock (default 2)")
    ap.add_argument("--writers", type=int, default=2,
                    help="Rust workers writing the read-write lock (default 2)")
    ap.add_argument("--multi", type=int, default=2,
                    help="Rust workers holding the multi-key lock, whose first key is the lock's "
                         "(default 2)")
    ap.add_argument("--multi-keys", type=int, default=3,
                    help="keys of the multi-key lock (default 3)")
    ap.add_argument("--ttl-ms", type=int, default=1000)
    ap.add_argument("--lock-delay-ms", type=int, default=500)
    ap.add_argument("--profile", default="debug", help="target/<profile> holds the binaries")
    ap.add_argument("--logdir", help="where worker logs go (default: a new temp dir)")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    args.langs = [l for l in args.langs.split(",") if l]
    args.sem_langs = [l for l in args.sem_langs.split(",") if l]
    for l in args.langs + args.sem_langs:
        if l not in ("rust", "c", "python", "node"):
            ap.error(f"unknown language {l!r} (known: rust, c, python, node)")
    if len(args.langs) + args.multi < 2:
        ap.error("the lock needs at least two workers (--langs, --multi)")
    if args.readers + args.writers == 1 or min(args.readers, args.writers, args.multi) < 0:
        ap.error("the read-write lock needs no worker or at least two (--readers, --writers)")
    if args.multi_keys < 2:
        ap.error("the multi-key lock needs at least two keys (--multi-keys)")
    faults = [f for f in args.faults.split(",") if f]
    for f in faults:
        if f not in FAULTS:
            ap.error(f"unknown fault {f!r} (known: {', '.join(FAULTS)})")
    r = Run(args)
    print(f"faults: logs in {r.logdir}; TTL {args.ttl_ms} ms, lock-delay {args.lock_delay_ms} ms, "
          f"lock workers {', '.join(args.langs)}, semaphore (limit {args.limit}) workers "
          f"{', '.join(args.sem_langs) or 'none'}, read-write lock workers (Rust) "
          f"{args.readers} readers and {args.writers} writers, multi-key lock ({args.multi_keys} "
          f"keys, the lock's among them) workers (Rust) {args.multi}, {args.episodes} episodes "
          f"of {', '.join(faults)}", flush=True)
    problems = []
    try:
        r.start()
        for i in range(args.episodes):
            kind = faults[i % len(faults)]
            # Odd rounds of the rotation aim at a multi-key holder of the lock's key; the
            # read-write lock's target alternates between a writer and a reader.
            r.episode(kind, multi=args.multi > 0 and (i // len(faults)) % 2 == 1,
                      reader=i % 2 == 1)
            ep = r.episodes[-1]
            rw = f", {ep['rw_holder']}" if ep["rw_holder"] else ""
            print(f"  episode {i + 1}: {kind} on {ep['holder']}{rw} "
                  f"({(ep['healed'] - ep['start']) / 1e9:.1f} s)", flush=True)
        problems += r.stop()
        run_end = mono_ns()
        final = r.final_counter()
        rw_final = r.final_counter(r.rw_counter)
        left = r.wait_no_sessions()
    except Failure as e:
        r.shutdown()
        print(f"faults: FAIL: {e}")
        return 1
    finally:
        r.shutdown()
    logs = {name: w.events for name, w in r.workers.items() if w.mode in ("lock", "multi")}
    multi = [name for name, w in r.workers.items() if w.mode == "multi"]
    p, fig = check(logs, r.kills, r.freezes, r.restarts, r.episodes, final, left,
                   r.ttl_ns, r.ld_ns, run_end, multi)
    problems += p
    print(f"  {fig['holdings']} holdings, {fig['increments']} increments, {fig['fenced']} stale "
          f"writes fenced, {fig['unknown']} of unknown outcome, "
          f"{fig['state_loss']} overlaps across a server restart (state lost), final counter "
          f"{final}")
    if multi:
        hit = sum(1 for ep in r.episodes if ep["holder_mode"] == "multi")
        print(f"  multi-key lock ({args.multi_keys} keys): {fig['multi_holdings']} of those "
              f"holdings, {fig['multi_swaps']} hand-overs between it and a single-key lock on "
              f"the shared key, {hit} episodes hit its holder")
    rw_logs = {name: w.events for name, w in r.workers.items() if w.mode in ("read", "write")}
    if rw_logs:
        modes = {name: r.workers[name].mode for name in rw_logs}
        p, rfig = check_rw(rw_logs, modes, r.kills, r.freezes, r.restarts, r.episodes, rw_final,
                           r.ttl_ns, r.ld_ns, run_end)
        problems += p
        for k in ("lost_updates", "frozen", "before", "cut", "margins"):
            fig[k] += rfig[k]
        hit = sum(1 for ep in r.episodes if ep["rw_holder"])
        print(f"  read-write lock: {rfig['holdings']} holdings ({rfig['writes']} by writers), "
              f"{rfig['shared']} reader overlaps (shared), {rfig['increments']} increments, "
              f"{rfig['fenced']} stale writes fenced, {rfig['unknown']} of unknown outcome, "
              f"{rfig['frozen']} frozen and {rfig['state_loss']} state-lost overlaps, loss "
              f"before next holder {rfig['before']}/{rfig['cut']}, {hit} episodes hit a holder, "
              f"final counter {rw_final}")
    sem_logs = {name: w.events for name, w in r.workers.items() if w.mode == "sem"}
    if sem_logs:
        p, sfig = check_sem(sem_logs, r.kills, r.freezes, r.restarts, r.episodes, args.limit,
                            r.ttl_ns, r.ld_ns, run_end)
        problems += p
        print(f"  semaphore (limit {args.limit}): {sfig['holdings']} holdings, at most "
              f"{sfig['most']} believed held at once, {sfig['frozen']} frozen and "
              f"{sfig['state_loss']} state-lost holders over the limit")
    for prob in problems:
        print(f"faults: VIOLATION: {prob}")
    print(summary(problems, fig))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
