"""The Python worker of `make demo` (demo/run.py starts it).

    worker.py leader NAME KEY TTL_MS LOCK_DELAY_MS
    worker.py semaphore NAME PREFIX LIMIT ROUNDS HOLD_MS TTL_MS
    worker.py contend NAME LOCK_KEY SEM_PREFIX ROUNDS     (the cross-language test)

Prints human lines and `@event key=value ...` lines the orchestrator reads; times
are Unix milliseconds. SIGTERM: a leader resigns, anyone else stops waiting;
either way the client closes and its session is destroyed.
"""

import os
import signal
import sys
import time

import consul_baton as baton
class Stop(Exception):
    """Raised in the main thread by SIGTERM; interrupts a blocked baton call."""


def on_term(signum, frame):
    raise Stop()


def now_ms():
    return int(time.time() * 1000)


def event(name, **fields):
    extra = "".join(f" {k}={v}" for k, v in fields.items())
    print(f"@{name} t={now_ms()}{extra}", flush=True)


def report_metrics(client, mode):
    """What the client counted, for the demo's closing summary: one `@metrics` line."""
    m = client.metrics()
    total = lambda by: sum(sum(inner.values()) for inner in by.values())  # noqa: E731
    event(
        "metrics",
        mode=mode,
        acquired=sum(o["acquired"] for o in m["acquires"].values()),
        timed_out=sum(o["timed_out"] for o in m["acquires"].values()),
        losses=total(m["losses"]),
        renewals=m["renewals"]["ok"],
        renewals_failed=m["renewals"]["failed"],
        requests=total(m["requests"]),
        refused_429=sum(o["429"] for o in m["requests"].values()),
    )


def leader(name, key, ttl_ms, lock_delay_ms):
    with baton.Client() as client:
        try:
            return lead(client, name, key, ttl_ms, lock_delay_ms)
        finally:
            report_metrics(client, "leader")


def lead(client, name, key, ttl_ms, lock_delay_ms):
    session = client.create_session(
        name=f"demo-{name}", ttl=ttl_ms / 1000, lock_delay=lock_delay_ms / 1000
    )
    election = client.election(key, session=session)
    try:
        event("campaigning")
        election.campaign(name.encode())
        seq = election.sequencer
        event("leading", token=seq.token, lock_index=seq.lock_index)
        reason = election.wait_lost()
        event("lost", reason=reason)
        return 1
    except Stop:
        if election.is_leader():
            election.resign()
            event("resigned")
        else:
            event("stopped")
        return 0


def semaphore(name, prefix, limit, rounds, hold_ms, ttl_ms):
    with baton.Client() as client:
        try:
            return take_slots(client, name, prefix, limit, rounds, hold_ms, ttl_ms)
        finally:
            report_metrics(client, "semaphore")


def take_slots(client, name, prefix, limit, rounds, hold_ms, ttl_ms):
    session = client.create_session(
        name=f"demo-{name}", ttl=ttl_ms / 1000, lock_delay=0, behavior="delete"
    )
    sem = client.semaphore(prefix, limit, value=name.encode(), session=session)
    try:
        for _ in range(rounds):
            sem.acquire()
            event("slot", state="acquired")
            time.sleep(hold_ms / 1000)
            event("slot", state="releasing")
            sem.release()
        event("done")
        return 0
    except Stop:
        event("stopped")
        return 0


def now_us():
    # CLOCK_MONOTONIC: the clock every contender of the cross-language test reads (the wall
    # clock may be stepped or slewed meanwhile).
    return time.monotonic_ns() // 1000


def contend(name, lock_key, sem_prefix, rounds):
    """The cross-language test (tests/cross/run.py): `rounds` holdings of one lock
    and of a 2-slot semaphore, each reported as an interval in microseconds; after
    each lock round, the leader read through the election API."""
    value = f"{name}:{os.getpid()}".encode()
    with baton.Client() as client:
        lock = client.lock(lock_key, value=value)
        election = client.election(lock_key)
        for _ in range(rounds):
            lock.acquire()
            start = now_us()
            token = lock.sequencer.token
            time.sleep(0.001)
            end = now_us()
            lock.release()
            print(f"@hold kind=lock start={start} end={end} token={token}", flush=True)
            seen = election.leader()
            if seen is not None:
                print(f"@saw value={seen.value.decode()} token={seen.token}", flush=True)
        sem = client.semaphore(sem_prefix, 2, value=value)
        for _ in range(rounds // 2):
            sem.acquire()
            start = now_us()
            time.sleep(0.002)
            end = now_us()
            sem.release()
            print(f"@hold kind=sem start={start} end={end}", flush=True)
    print(f"@done t={now_ms()}", flush=True)
    return 0


def main(argv):
    signal.signal(signal.SIGTERM, on_term)
    mode = argv[1]
    if mode == "leader":
        return leader(argv[2], argv[3], int(argv[4]), int(argv[5]))
    if mode == "contend":
        return contend(argv[2], argv[3], argv[4], int(argv[5]))
    if mode == "semaphore":
        return semaphore(argv[2], argv[3], *(int(a) for a in argv[4:8]))
    print(f"unknown mode {mode!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
