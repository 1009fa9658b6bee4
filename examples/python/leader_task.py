"""A leader task: two candidates, and only the leader runs the periodic work.

Each candidate runs `LeaderTask.run(work, stop)`. The leader's `work(token)` does a unit of
work every 100 ms until its token fires — the moment leadership is lost or the candidate is
told to stop. Here the first leader is stopped after 3 units: it resigns, the other candidate
takes over at once and works until it is stopped too. Exits non-zero unless both led, one at
a time, with growing fencing tokens.

    python examples/python/leader_task.py     (CONSUL_HTTP_ADDR, or its own dev server)
"""

import sys
import threading
import uuid

import consul_baton as baton

from _target import consul_address


def candidate(addr, key, name, stop, log, lock):
    with baton.Client(addr) as client:
        task = client.leader_task(
            key, name,
            on_started_leading=lambda: print(f"{name}: elected"),
            on_stopped_leading=lambda why: print(f"{name}: stopped leading ({why})"),
        )

        def work(token):
            fencing = task.sequencer.token
            while not token.wait(0.1):  # a unit of work every 100 ms, until the token fires
                with lock:
                    log.append((name, fencing))
                print(f"{name}: working (fencing token {fencing})")

        task.run(work, stop)


def main(addr):
    key = f"examples/python/leader-task-{uuid.uuid4()}"
    log, lock = [], threading.Lock()
    stops = {name: baton.CancelToken() for name in ("ada", "grace")}
    threads = [threading.Thread(target=candidate, args=(addr, key, n, s, log, lock))
               for n, s in stops.items()]
    for t in threads:
        t.start()
    leaders = []
    # Stop each leader after it did 3 units of work; the other one takes over.
    while len(leaders) < 2:
        with lock:
            recent = [n for n, _ in log[-3:]]
        if len(recent) == 3 and len(set(recent)) == 1 and recent[0] not in leaders:
            leaders.append(recent[0])
            print(f"main: stopping {recent[0]}")
            stops[recent[0]].cancel()
        threading.Event().wait(0.02)
    for t in threads:
        t.join(30)
    names = [n for n, _ in log]
    switches = sum(1 for a, b in zip(names, names[1:]) if a != b)
    tokens = [t for _, t in log]
    ok = set(names) == {"ada", "grace"} and switches == 1 and tokens == sorted(tokens)
    print(f"leaders in turn: {leaders}, one hand-over, tokens grew: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    with consul_address() as addr:
        sys.exit(main(addr))
