"""The Python worker of the fault harness (tests/faults/run.py starts it; the protocol is in
tests/faults/README.md, shared with worker.rs, worker.c and worker.js).

    worker.py NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]

with CONSUL_HTTP_ADDR set to its proxy. Runs until stdin reaches EOF or gets the line ``quit``;
prints one ``@<event> t=<CLOCK_MONOTONIC ns> key=value ...`` line per event, flushed at once.
With LIMIT (semaphore mode) it holds a slot of the semaphore on KEY, the prefix, instead of the
lock, and COUNTER is unused.
"""

import random
import sys
import threading
import time

import consul_baton as baton
HOLD_NS = 200_000_000
WORK_S = 0.020
SLOT_CHECK_S = 0.010  # how often a semaphore holder looks whether it still holds its slot
ACQUIRE_TIMEOUT_S = 1.0
SESSION_RETRY_S = 0.100
ACQUIRE_RETRY_S = 0.050
REQUEST_TIMEOUT_S = 2.0

# What guarded_put raises when Consul refused the write because the sequencer's session does not
# hold the key (any longer): the check-session op failing is a ConflictError ("stale sequencer
# ..."); an invalidated session is a SessionLostError. Either way the write was not applied.
FENCED = (baton.ConflictError, baton.SessionLostError)


def now():
    return time.monotonic_ns()


def emit(event, t=None, **fields):
    if t is None:
        t = now()
    extra = "".join(f" {k}={v}" for k, v in fields.items())
    print(f"@{event} t={t}{extra}", flush=True)


def error(what):
    # One line per event: the text is the last field and keeps no line breaks.
    emit("error", what=" ".join(str(what).split()))


def describe(e):
    code = getattr(e, "code", None) or type(e).__name__
    return f"{code}: {e}"


def watch_stdin(quit_event):
    """Sets quit_event on EOF or a `quit` line (a daemon thread)."""
    try:
        for line in sys.stdin:
            if line.strip() == "quit":
                break
    finally:
        quit_event.set()


class Holding:
    """One acquisition of the lock (or a semaphore slot): the time its lost callback first ran
    (None before).

    A fresh Lock (Semaphore) is made for each acquire attempt and its callback is bound to that
    attempt's Holding, so a late callback of an earlier holding never counts for a later one."""

    def __init__(self):
        self._mu = threading.Lock()
        self.lost_at = None

    def on_lost(self, _why):
        t = now()
        with self._mu:
            if self.lost_at is None:
                self.lost_at = t

    def lost_time(self):
        with self._mu:
            return self.lost_at


def read_counter(client, counter):
    raw = client.kv_get(counter)
    if raw is None:
        return 0
    return int(raw.decode("ascii"))


def still_held(primitive, holding):
    """False once the holding's lost callback ran or its Lock/Semaphore is no longer held."""
    return holding.lost_time() is None and primitive.locked()


def track_deadline(session, deadline):
    """deadline = max(deadline, now + session time left)."""
    t0 = now()
    left = session.time_left()
    if left is not None:
        deadline = max(deadline, t0 + int(left * 1e9))
    return deadline


def lease_deadline(session, deadline):
    """deadline = max(deadline, the session's local lease deadline): a loss leaves it at the
    last renew's, so read at the end it is exact even when the hold loop, which samples only
    between increments, was blocked across a renew (a partition's timed-out request)."""
    until = session.valid_until()
    if until is None:
        return deadline
    return max(deadline, int(until * 1e9))


def end(primitive, holding, token, deadline, seen_lost):
    """Step 4: the holding's one @end. seen_lost is when the hold loop saw it lost (None when
    the 200 ms ran out or quit came): released if still held, else lost."""
    if seen_lost is None:
        if still_held(primitive, holding):
            emit("end", token=token, why="released", deadline=deadline)
            try:
                primitive.release()
            except (baton.BatonError, RuntimeError) as e:
                error(f"release: {describe(e)}")
            return
        seen_lost = now()
    cb = holding.lost_time()
    t = seen_lost if cb is None else min(cb, seen_lost)
    emit("end", t=t, token=token, why="lost", deadline=deadline)


def hold(session, held, holding, token, quit_event, work):
    """Steps 3 and 4: `work()` again and again for 200 ms from the start while `held` (a Lock
    or a Semaphore) is held, then exactly one @end."""
    start = now()
    deadline = 0
    seen_lost = None
    while now() - start < HOLD_NS and not quit_event.is_set():
        if not still_held(held, holding):
            seen_lost = now()
            break
        deadline = track_deadline(session, deadline)
        work()
    end(held, holding, token, lease_deadline(session, deadline), seen_lost)


def increment(client, seq, counter):
    """One fenced increment: read, the "work", then guarded_put of value + 1 without checking
    again (a freeze in the work leaves a stale holder about to write)."""
    try:
        value = read_counter(client, counter)
    except baton.BatonError as e:
        error(f"read {counter}: {describe(e)}")
        time.sleep(WORK_S)
        return
    except (ValueError, UnicodeDecodeError) as e:
        error(f"read {counter}: not a decimal value: {e}")
        time.sleep(WORK_S)
        return
    time.sleep(WORK_S)
    new = value + 1
    try:
        client.guarded_put(seq, counter, str(new).encode("ascii"))
    except FENCED:
        emit("fenced", value=new, token=seq.token)
    except baton.BatonError as e:
        emit("incunk", value=new, token=seq.token, err=e.code)
    else:
        emit("inc", value=new, token=seq.token)


def hold_lock(client, session, lock, holding, counter, quit_event):
    """Lock mode: @start with the sequencer, then fenced increments."""
    seq = lock.sequencer
    if seq is None:
        # Lost between acquire returning and this read: no token to report or fence with.
        error("acquired but the lock has no sequencer (lost at once)")
        return
    emit("start", token=seq.token, lock_index=seq.lock_index, session=session.id)
    hold(session, lock, holding, seq.token, quit_event, lambda: increment(client, seq, counter))


def hold_slot(session, sem, holding, token, quit_event):
    """Semaphore mode: @start with the holding's number (from 1), then only checks every
    10 ms that the slot is still held."""
    emit("start", token=token, session=session.id)
    hold(session, sem, holding, token, quit_event, lambda: time.sleep(SLOT_CHECK_S))


def run(name, key, counter, ttl_ms, lock_delay_ms, limit=None):
    quit_event = threading.Event()
    threading.Thread(target=watch_stdin, args=(quit_event,), daemon=True).start()
    client = baton.Client(request_timeout=REQUEST_TIMEOUT_S)
    session = None
    holdings = 0  # semaphore mode: the @start tokens
    while not quit_event.is_set():
        # 1. Session.
        if session is None or not session.is_valid():
            session = None  # dropped; client.close() destroys it if it is still alive
            try:
                session = client.create_session(
                    name=f"faults-{name}",
                    ttl=ttl_ms / 1000,
                    lock_delay=lock_delay_ms / 1000,
                    behavior="release",
                )
            except baton.BatonError as e:
                error(f"create session: {describe(e)}")
                quit_event.wait(SESSION_RETRY_S)
                continue
            emit("session", id=session.id)

        # 2. Acquire: the lock on KEY, or in semaphore mode a slot of the semaphore on KEY.
        if limit is None:
            primitive = client.lock(key, value=name.encode(), session=session)
        else:
            primitive = client.semaphore(key, limit, value=name.encode(), session=session)
        holding = Holding()
        primitive.on_lost(holding.on_lost)
        try:
            acquired = primitive.acquire(timeout=ACQUIRE_TIMEOUT_S)
        except baton.BatonError as e:
            error(f"acquire: {describe(e)}")
            time.sleep(ACQUIRE_RETRY_S)
            continue
        if not acquired:
            continue

        # 3 and 4. Hold, end.
        if limit is None:
            hold_lock(client, session, primitive, holding, counter, quit_event)
        else:
            holdings += 1
            hold_slot(session, primitive, holding, holdings, quit_event)
        time.sleep(random.uniform(0, 0.030))

    # 5. Quit.
    client.close()
    emit("bye")
    return 0


def main(argv):
    if len(argv) not in (6, 7):
        print("usage: worker.py NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]", file=sys.stderr)
        return 2
    name, key, counter = argv[1], argv[2], argv[3]
    limit = None
    if len(argv) == 7:
        limit = int(argv[6])
        if limit < 1:
            print(f"worker.py: LIMIT must be positive, got {limit}", file=sys.stderr)
            return 2
    return run(name, key, counter, int(argv[4]), int(argv[5]), limit)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
