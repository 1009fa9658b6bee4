"""A lock that follows the holder's health (sessions bound to a TTL check).

The worker registers a TTL check, binds its session to it, and keeps the check passing
from a health function while it holds the lock. When the health function starts failing
(here: after a few rounds, as if a dependency went away) it stops reporting, the check
turns critical at the end of its TTL, Consul invalidates the session and the lock is lost:
the lost callback fires and a standby takes over. Exits non-zero if that does not happen.

    python examples/python/health_checked_lock.py    (CONSUL_HTTP_ADDR, or its own dev server)
"""

import os
import sys
import threading
import time
import uuid

import consul_baton as baton
from _target import consul_address

CHECK_TTL = 2.0  # seconds without a pass before the check turns critical
HEALTHY_ROUNDS = 6  # the health function succeeds this many times, then fails


def main(addr):
    key = f"examples/python/health-lock-{uuid.uuid4()}"
    check = f"worker-health-{os.getpid()}"
    rounds = 0

    def healthy():
        """The application's own health function (here: healthy for HEALTHY_ROUNDS calls)."""
        nonlocal rounds
        rounds += 1
        return rounds <= HEALTHY_ROUNDS

    with baton.Client(addr) as worker, baton.Client(addr) as standby:
        # 1. A TTL check, passing from the start (a TTL check starts critical, and Consul
        #    refuses to bind a session to a check that is not passing).
        worker.agent.check_register(check, CHECK_TTL, name="worker health", status="passing")
        try:
            # 2. A session bound to it (and to the node's serfHealth, as by default);
            #    lock_delay=0 so the standby can take over as soon as the session ends.
            session = worker.create_session(name="health-checked worker", ttl=10, lock_delay=0,
                                            node_checks=["serfHealth", check])
            lock = worker.lock(key, value=b"worker", session=session)
            if not lock.acquire(timeout=10):
                raise SystemExit("the worker could not take the lock")
            lost = threading.Event()
            lock.on_lost(lambda why: (print(f"worker: lock lost ({why})"), lost.set()))
            print(f"worker: holding {key} with session {session.id}")

            took_over = []
            standby_thread = threading.Thread(
                target=lambda: took_over.append(standby.lock(key, value=b"standby").acquire(timeout=30)))
            standby_thread.start()

            # 3. Keep the check passing from the health function, more often than its TTL.
            last_pass = None
            while not lost.is_set():
                if healthy():
                    worker.agent.check_pass(check, f"round {rounds} ok")
                    last_pass = time.monotonic()
                    print(f"worker: healthy (round {rounds}), check passed")
                else:
                    print(f"worker: health function failed (round {rounds}): no more passes")
                    break
                lost.wait(CHECK_TTL / 3)

            # 4. The check turns critical after CHECK_TTL: the session and the lock are gone.
            if not lost.wait(30):
                raise SystemExit("the lock was not lost after the health function failed")
            print(f"worker: lost {time.monotonic() - last_pass:.2f}s after the last pass "
                  f"(check TTL {CHECK_TTL}s)")
            standby_thread.join()
            if took_over != [True]:
                raise SystemExit("the standby did not take over")
            print("standby: took over the lock")
        finally:
            worker.agent.check_deregister(check)


if __name__ == "__main__":
    with consul_address() as addr:
        main(addr)
    sys.exit(0)
