"""The thread that relays signals (Ctrl-C) to blocking calls on the main thread lives no
longer than the clients: closing the last one joins it, and the next client's call starts it
again. Run in a child process, so that no other test's clients are counted."""

import subprocess
import sys
import textwrap
import uuid

SCRIPT = textwrap.dedent(
    """
    import os, sys, consul_baton as baton

    # A thread's name as the kernel keeps it: 15 characters.
    SIGNALS = "baton-py-signals"[:15]

    def names():
        out = []
        for t in os.listdir("/proc/self/task"):
            try:
                out.append(open(f"/proc/self/task/{t}/comm").read().strip())
            except OSError:
                pass
        return out

    addr, key = sys.argv[1], sys.argv[2]
    for round in range(2):
        holder, waiter = baton.Client(addr), baton.Client(addr)
        lock = holder.lock(key)
        assert lock.acquire(timeout=10)
        # A blocking call on the main thread: its signals are relayed by the thread.
        assert not waiter.lock(key).acquire(timeout=0.2)
        assert SIGNALS in names(), (round, names())
        waiter.close()
        # One client still open: the thread stays.
        assert SIGNALS in names(), (round, names())
        lock.release()
        holder.close()
        left = [n for n in names() if n.startswith("baton-")]
        assert left == [], (round, left)
    print("ok")
    """
)


def test_the_signal_thread_ends_with_the_last_client(devserver):
    key = f"baton-py-signals/{uuid.uuid4().hex}"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, devserver, key],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
