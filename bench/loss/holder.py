"""The Python holder of `make bench-loss` (bench/loss/run.py drives it; same protocol as holder.rs).

    holder.py ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS

Prints READY once connected; for each ``acquire`` line on stdin: creates a session, acquires KEY
with it, watches the loss signals, prints HELD, and once the holding is lost prints
``RESULT {json}`` with CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns()``; null: missing
SIGNAL_TIMEOUT_MS after the deadline) of:

* ``is_held``   -- the first ``Lock.locked()`` False, polled every ~1 ms;
* ``callback``  -- the ``Lock.on_lost`` callback;
* ``wait_lost`` -- ``Lock.wait_lost()`` returning in a thread blocked in it;
* ``token``     -- ``baton.aio.Lock.wait_lost()`` completing on an asyncio loop in another thread:
  the Python binding has no cancel token, an awaited loss is its closest signal.

The deadline: the poll thread reads ``Session.time_left()`` while held; each reading gives a
lower bound (clock read before the call + time left) and the largest is kept (the deadline
only moves forward). ``quit`` or the end of stdin closes the client.
"""

import asyncio
import json
import sys
import threading
import time

import consul_baton as baton
import consul_baton.aio  # baton.aio
SIGNALS = ("is_held", "callback", "wait_lost", "token")


def say(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Episode:
    def __init__(self):
        self.cv = threading.Condition()
        self.at = {}
        self.reason = {}
        self.deadline = 0
        self.done = threading.Event()

    def record(self, name, t, reason=""):
        with self.cv:
            if name not in self.at:
                self.at[name] = t
                self.reason[name] = reason
                self.cv.notify_all()


def run_episode(client, loop, key, ttl_ms, delay_ms, signal_timeout_ns, n):
    e = Episode()
    session = client.create_session(name="bench-loss-python", ttl=ttl_ms / 1000, lock_delay=delay_ms / 1000)
    lock = client.lock(key, session=session)
    lock.on_lost(lambda why: e.record("callback", time.monotonic_ns(), why))
    if not lock.acquire(timeout=60):
        sys.exit("bench-loss holder.py: not acquired within 60 s")
    acquired = time.monotonic_ns()

    def poll():
        while not e.done.is_set():
            t0 = time.monotonic_ns()
            if not lock.locked():
                e.record("is_held", time.monotonic_ns())
                return
            left = session.time_left()
            if left:
                e.deadline = max(e.deadline, t0 + int(left * 1e9))
            time.sleep(0.001)

    def wait_lost():
        # Slices, so the thread ends when the episode gives up on this signal.
        while not e.done.is_set():
            try:
                why = lock.wait_lost(timeout=0.2)
            except baton.TimeoutError:
                continue
            e.record("wait_lost", time.monotonic_ns(), why)
            return

    async def aio_wait(alock):
        why = await alock.wait_lost()
        e.record("token", time.monotonic_ns(), why)

    threads = [threading.Thread(target=poll, daemon=True), threading.Thread(target=wait_lost, daemon=True)]
    for t in threads:
        t.start()
    task = asyncio.run_coroutine_threadsafe(aio_wait(baton.aio.Lock(lock)), loop)
    say("HELD")

    with e.cv:
        e.cv.wait_for(lambda: e.at)
        bound = max(e.deadline, min(e.at.values())) + signal_timeout_ns
        while len(e.at) < len(SIGNALS):
            left = (bound - time.monotonic_ns()) / 1e9
            if left <= 0:
                break
            e.cv.wait(timeout=left)
    e.done.set()
    task.cancel()
    for t in threads:
        t.join()
    result = {"lang": "python", "episode": n, "acquired": acquired, "deadline": e.deadline or None}
    with e.cv:
        for s in SIGNALS:
            result[s] = e.at.get(s)
        result["callback_reason"] = e.reason.get("callback", "")
        result["wait_lost_reason"] = e.reason.get("wait_lost", "")
    result["session_state"] = session.state
    say("RESULT " + json.dumps(result))


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: holder.py ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS")
    addr, key = sys.argv[1], sys.argv[2]
    ttl_ms, delay_ms, timeout_ms = (int(a) for a in sys.argv[3:6])
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    client = baton.Client(addr)
    say("READY")
    n = 0
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd != "acquire":
            sys.exit(f"bench-loss holder.py: unknown command {cmd!r}")
        n += 1
        run_episode(client, loop, key, ttl_ms, delay_ms, timeout_ms * 1_000_000, n)
    client.close()


if __name__ == "__main__":
    main()
