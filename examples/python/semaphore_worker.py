"""Semaphore-limited workers (sync API, one thread and one session each).

Five workers share a semaphore of 2 slots; each runs three jobs, a job only while
holding a slot. Exits non-zero if more than 2 jobs ever ran at once.

    python examples/python/semaphore_worker.py    (CONSUL_HTTP_ADDR, or its own dev server)
"""

import sys
import threading
import time
import uuid

import consul_baton as baton
from _target import consul_address

LIMIT, WORKERS, JOBS = 2, 5, 3


def main(addr):
    prefix = f"examples/python/pool-{uuid.uuid4()}"
    running, most, lock = 0, 0, threading.Lock()
    errors = []

    def worker(n):
        nonlocal running, most
        try:
            with baton.Client(addr) as client:
                session = client.create_session(name=f"worker-{n}", ttl=10, lock_delay=0,
                                                behavior="delete")
                sem = client.semaphore(prefix, LIMIT, value=f"worker-{n}".encode(), session=session)
                for job in range(JOBS):
                    with sem:  # acquire(); released on every exit path
                        with lock:
                            running += 1
                            most = max(most, running)
                            print(f"worker {n}: job {job + 1} ({running} running)")
                        time.sleep(0.05)
                        with lock:
                            running -= 1
        except baton.BatonError as e:
            errors.append(f"worker {n}: {e}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(1, WORKERS + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = not errors and most <= LIMIT
    print(f"{WORKERS * JOBS} jobs, at most {most} at once (limit {LIMIT}): {'ok' if ok else 'FAILED'}")
    for e in errors:
        print(e)
    return 0 if ok else 1


if __name__ == "__main__":
    with consul_address() as addr:
        sys.exit(main(addr))
