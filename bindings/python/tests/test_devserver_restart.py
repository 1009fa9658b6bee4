"""A fencing token taken after ``DevServer.restart()`` is above one taken before it (issue 43):
the restart loses the sessions and keys, as a cluster losing its sessions does, but keeps the
raft index, so a token never goes backwards."""

import consul_baton as baton
from consul_baton.devserver import start_devserver

PATIENCE = 30.0  # a bound for "eventually", not a speed assertion


def test_fencing_token_after_restart_is_above_the_one_before():
    with start_devserver(session_ttl_min="100ms") as server:
        c = baton.Client(server.addr)
        try:
            for i in range(5):
                assert c.kv_put(f"restart/k{i}", "v") is True
            lock = c.lock("restart/lock")
            assert lock.acquire(timeout=PATIENCE)
            before = lock.sequencer.token
            status_before = server.status()["index"]
            server.restart()
            assert server.status()["index"] >= status_before
            c.close()
            c = baton.Client(server.addr)
            lock = c.lock("restart/lock")
            assert lock.acquire(timeout=PATIENCE)
            after = lock.sequencer.token
            assert after > before, f"fencing token {after} after the restart, {before} before"
            lock.release()
        finally:
            c.close()
