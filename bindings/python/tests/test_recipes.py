"""Locks, semaphores, elections and fencing from Python, against a dev server."""

import os
import signal
import sys
import threading
import time
import uuid

import pytest

import consul_baton as baton
def key(name: str) -> str:
    return f"py-test/{name}/{uuid.uuid4()}"


def test_lock_is_threading_shaped_and_releases_on_exceptions(client, devserver):
    k = key("lock")
    lock = client.lock(k, value=b"me")
    assert not lock.locked()
    with pytest.raises(RuntimeError):
        lock.release()
    assert lock.acquire() is True
    assert lock.locked()
    seq = lock.sequencer
    assert seq.key == k and seq.lock_index >= 1 and seq.token > 0
    assert baton.Sequencer.parse(str(seq)) == seq
    lock.release()
    assert not lock.locked()

    other = baton.Client(devserver)
    try:
        with pytest.raises(ZeroDivisionError):
            with client.lock(k) as held:
                assert held is True
                # Someone else cannot take it meanwhile.
                rival = other.lock(k)
                assert rival.acquire(blocking=False) is False
                1 / 0
        assert other.lock(k).acquire(timeout=5) is True, "released on the exception"
    finally:
        other.close()


def test_bad_arguments_raise_clear_errors(client):
    with pytest.raises(baton.InvalidArgumentError, match="missing key"):
        client.lock("")
    with pytest.raises(ValueError, match="limit must be a positive integer"):
        client.semaphore("p", 0)
    with pytest.raises(TypeError):
        client.lock(42)
    lock = client.lock(key("args"))
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(blocking=False, timeout=3)
    with pytest.raises(ValueError, match="non-negative"):
        lock.acquire(timeout=-5)
    with pytest.raises(TypeError, match="callable"):
        lock.on_lost(3)


def test_a_second_thread_runs_while_one_blocks_in_acquire(client, devserver, ticker):
    k = key("gil")
    holder = baton.Client(devserver)
    try:
        held = holder.lock(k)  # keep a reference: a dropped Lock releases itself
        assert held.acquire()
        with ticker() as ticks:
            assert client.lock(k).acquire(timeout=0.5) is False
        assert len(ticks) >= 10, f"the other thread starved: {len(ticks)} ticks"
    finally:
        holder.close()


def _call_threads():
    """The thread ids of the pool threads of blocking calls ("baton-py-call")."""
    found = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() == "baton-py-call":
                    found.add(tid)
        except OSError:
            pass  # the thread ended meanwhile
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads thread names from /proc")
def test_a_blocking_call_on_the_main_thread_runs_on_it(client, devserver):
    # No thread per call: the core call runs on the calling thread (Ctrl-C reaches it through
    # the wakeup fd), so no "baton-py-call" thread appears while one waits.
    assert threading.current_thread() is threading.main_thread()
    k = key("own-thread")
    holder = baton.Client(devserver)
    try:
        held = holder.lock(k)
        assert held.acquire()
        before = _call_threads()
        seen = set()
        done = threading.Event()

        def sample():
            while not done.is_set():
                seen.update(_call_threads())
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            assert client.lock(k).acquire(timeout=0.3) is False
        finally:
            done.set()
            sampler.join()
        assert not (seen - before), f"new call threads while waiting: {seen - before}"
    finally:
        holder.close()


def test_ctrl_c_interrupts_a_blocked_acquire_and_leaves_nothing_held(client, devserver, sigint_handled):
    k = key("sigint")
    holder = baton.Client(devserver)
    try:
        held = holder.lock(k)
        assert held.acquire()
        lock = client.lock(k)
        timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
        start = time.monotonic()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            # Bounded, so a signal that never arrives fails the test instead of hanging it.
            lock.acquire(timeout=30)
        took = time.monotonic() - start - 0.3
        print(f"KeyboardInterrupt raised {took * 1000:.0f} ms after SIGINT")
        assert not lock.locked()
        holder.close()
        # Nothing of ours is left: a third client gets the lock at once.
        third = baton.Client(devserver)
        try:
            assert third.lock(k).acquire(timeout=5)
        finally:
            third.close()
    finally:
        holder.close()


# How each holding is made, taken (with keywords for the call), given up and seen held.
HOLDINGS = {
    "lock": (lambda c, k: c.lock(k), lambda h, **kw: h.acquire(**kw),
             lambda h: h.release(), lambda h: h.locked()),
    "semaphore": (lambda c, k: c.semaphore(k, 1), lambda h, **kw: h.acquire(**kw),
                  lambda h: h.release(), lambda h: h.locked()),
    "election": (lambda c, k: c.election(k), lambda h, **kw: h.campaign(b"me", **kw),
                 lambda h: h.resign(), lambda h: h.is_leader()),
}


def cancel_after_the_call_returned(go, held, cancel, outcome):
    """A thread that makes a call's cancel (a token, a signal) come after the core call
    returned True but before the caller has taken the result. It waits for `go`, which the
    caller sets just before the call. With a long switch interval the interpreter is then its
    own whenever the caller lets go of it, and it keeps it while it waits for `held()` (the
    holding shows: the core call is returning, slowed down by server latency before that),
    gives the core call time to return (its caller cannot re-attach meanwhile, nor relay a
    cancel to it), calls `cancel()`, and gives that time to reach baton's side before
    letting the caller go. When the holding does not show for a second, the caller is
    waiting for the interpreter before its core call (CPython lets go of it inside
    `signal.set_wakeup_fd`): it lets the caller go on, and waits again. `outcome` gets
    "ok", or "never held" when the holding did not show within the bound."""

    def hog():
        go.wait()
        end = time.monotonic() + 10
        while True:
            patience = time.monotonic() + 1
            while not held() and time.monotonic() < patience:
                pass
            if held():
                break
            if time.monotonic() > end:
                outcome.append("never held")
                return
            time.sleep(0.05)  # lets the caller reach its core call
        spin(0.5)
        cancel()
        spin(0.3)
        outcome.append("ok")

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    return threading.Thread(target=hog)


def race_the_cancel(devserver, holding, call, cancel):
    """Runs `call()` (an acquire of `holding`, a HOLDINGS entry and its object) with
    `cancel()` made to come after its core call returned (above)."""
    make, take, give, held = holding[:4]
    mine = holding[4]
    # Once first: what a first acquire sets up (a session, what is learnt about the server)
    # logs, and a log record would wait for the interpreter the racing thread keeps.
    call()
    assert held(mine)
    give(mine)
    go, outcome = threading.Event(), []
    hog = cancel_after_the_call_returned(go, lambda: held(mine), cancel, outcome)
    old = sys.getswitchinterval()
    sys.setswitchinterval(30)
    _set_latency(devserver, "100ms")
    try:
        hog.start()
        go.set()
        call()
    finally:
        sys.setswitchinterval(old)
        go.set()
        hog.join()
        _set_latency(devserver, "0s")
    assert outcome == ["ok"], outcome


@pytest.mark.parametrize("kind", sorted(HOLDINGS))
def test_a_success_that_raced_the_cancel_token_is_given_back(client, devserver, dev_only, kind):
    """On the main thread a `cancel=` call runs its core call on a pooled thread with a token
    of its own, which the caller cancels when the user's token fires. When the user's token
    fires after the core call returned True, the caller must give the holding back and raise
    CancelledError: nothing is left held."""
    dev_only("latency")
    make, take, give, held = HOLDINGS[kind]
    k = key(f"raced-token-{kind}")
    mine = make(client, k)
    token = baton.CancelToken()
    with pytest.raises(baton.CancelledError) as raised:
        race_the_cancel(devserver, (*HOLDINGS[kind], mine),
                        lambda: take(mine, timeout=10, cancel=token), token.cancel)
    # The binding's words, not the core's: the core call had returned.
    assert "through its CancelToken" in str(raised.value), raised.value
    assert not held(mine)
    with baton.Client(devserver) as other:
        rival = make(other, k)
        assert take(rival, timeout=0) is True, "the raced success was not given back"
        give(rival)


@pytest.mark.parametrize("kind", sorted(HOLDINGS))
def test_a_success_that_raced_ctrl_c_is_given_back(client, devserver, dev_only, sigint_handled,
                                                    kind):
    """On the main thread the core call runs wired to signals; when Ctrl-C comes after it
    returned True, the caller must give the holding back and raise KeyboardInterrupt."""
    dev_only("latency")
    make, take, give, held = HOLDINGS[kind]
    k = key(f"raced-sigint-{kind}")
    mine = make(client, k)
    with pytest.raises(KeyboardInterrupt):
        race_the_cancel(devserver, (*HOLDINGS[kind], mine), lambda: take(mine, timeout=10),
                        lambda: os.kill(os.getpid(), signal.SIGINT))
    assert not held(mine)
    with baton.Client(devserver) as other:
        rival = make(other, k)
        assert take(rival, timeout=0) is True, "the raced success was not given back"
        give(rival)


def test_loss_is_signalled_and_callback_errors_go_to_the_unraisable_hook(client, devserver, monkeypatch):
    k = key("loss")
    lock = client.lock(k)
    reasons = []
    seen = threading.Event()
    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: unraisable.append(u))

    def on_lost(why):
        reasons.append(why)
        seen.set()
        raise RuntimeError("boom in callback")

    lock.on_lost(on_lost)
    assert lock.acquire()
    other = baton.Client(devserver)
    try:
        other.kv_put(k + "-unrelated", b"x")
        # Force-release: delete the key from another client.
        import urllib.request

        req = urllib.request.Request(f"http://{devserver}/v1/kv/{k}", method="DELETE")
        urllib.request.urlopen(req, timeout=5).read()
        assert seen.wait(20)
        assert reasons == ["key_changed"]
        assert lock.wait_lost(timeout=5) == "key_changed"
        assert not lock.locked()
        deadline = time.monotonic() + 5
        while not unraisable and time.monotonic() < deadline:
            time.sleep(0.02)
        assert unraisable and "boom in callback" in str(unraisable[0].exc_value)
        assert lock.acquire(timeout=5), "acquire again after loss"
    finally:
        other.close()


def test_semaphore_limits_holders(client, devserver):
    p = key("sem")
    clients = [baton.Client(devserver) for _ in range(3)]
    try:
        sems = [c.semaphore(p, 2) for c in clients]
        assert sems[0].acquire(timeout=5)
        assert sems[1].acquire(timeout=5)
        assert sems[2].acquire(blocking=False) is False
        sems[0].release()
        with sems[2] as held:
            assert held and sems[2].locked()
        assert not sems[2].locked()
    finally:
        for c in clients:
            c.close()


def test_semaphores_of_one_client_run_side_by_side(client):
    # Eight handles on one client, limit 3: three hold at once (each has a session of its
    # own, as Go's api.Semaphore does); they used to share one session and one slot.
    p = key("sem-one-client")
    sems = [client.semaphore(p, 3) for _ in range(8)]
    assert all(s.acquire(timeout=5) for s in sems[:3])
    assert not any(s.acquire(blocking=False) for s in sems[3:]), "the limit still holds"
    sems[0].release()
    assert sems[3].acquire(timeout=5)
    for s in sems:
        if s.locked():
            s.release()


def test_election_observe_failover_and_fencing(client, devserver):
    k = key("election")
    a_client, b_client = baton.Client(devserver), baton.Client(devserver)
    try:
        a, b = a_client.election(k), b_client.election(k)
        obs = client.election(k).observe()
        assert obs.next(timeout=10) is None
        assert a.campaign(b"node-a", timeout=10)
        leader = obs.next(timeout=10)
        assert leader.value == b"node-a"
        seq_a = a.sequencer
        a.proclaim(b"node-a v2")
        assert obs.next(timeout=10).lock_index == leader.lock_index
        client.guarded_put(seq_a, k + "-data", b"from a")

        assert a.resign()
        assert obs.next(timeout=10) is None
        assert b.campaign(b"node-b", timeout=10)
        assert next(iter(obs)).value == b"node-b"
        assert not client.check_sequencer(seq_a)
        with pytest.raises(baton.ConflictError, match="stale sequencer"):
            client.guarded_put(seq_a, k + "-data", b"late write from a")
        assert client.kv_get(k + "-data") == b"from a"
    finally:
        a_client.close()
        b_client.close()


def _set_latency(devserver: str, d: str) -> None:
    import urllib.request

    req = urllib.request.Request(f"http://{devserver}/_devserver/latency?d={d}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


@pytest.mark.parametrize("kind", ["lock", "semaphore"])
def test_a_dropped_holding_releases_without_holding_the_gil(client, devserver, dev_only, ticker, kind):
    """A held Lock or Semaphore that is garbage-collected releases its key over the network.
    That drop must not hold the GIL while it waits: other threads run meanwhile, and a baton
    thread that needs the GIL (a callback, a log record) cannot deadlock with it (the fault
    harness found a worker stuck so, in a semaphore's drop)."""
    dev_only("latency")
    k = key(f"drop-{kind}")
    held = client.lock(k) if kind == "lock" else client.semaphore(k, 1)
    assert held.acquire(timeout=5)
    with ticker() as ticks:
        _set_latency(devserver, "500ms")
        try:
            start = time.monotonic()
            del held  # the last reference: the release runs now
            took = time.monotonic() - start
        finally:
            _set_latency(devserver, "0s")
    during = [x for x in ticks if start <= x <= start + took]
    assert took >= 0.4, f"the drop did not wait for the release ({took:.3f} s): nothing was tested"
    assert len(during) >= 10, f"the other thread starved during a {took:.2f} s drop: {len(during)} ticks"
    # And the key is free.
    other = client.lock(k) if kind == "lock" else client.semaphore(k, 1)
    assert other.acquire(timeout=5)
    other.release()


def test_election_interoperates_with_the_guides_flags_0_leader_key(client, devserver):
    # Consul's leader-election guide (and curl, py-consul, most scripts) take the leader key
    # with a plain ?acquire=, flags 0. Reading the leader works on it; a campaign with Go's
    # flag says what to do; flags=0 campaigns alongside such clients.
    import json
    import urllib.request

    k = key("guide-election")
    guide = client.create_session(ttl=30)

    def guide_put(verb: str) -> bool:
        req = urllib.request.Request(
            f"http://{devserver}/v1/kv/{k}?{verb}={guide.id}", data=b"guide-leader", method="PUT"
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    assert guide_put("acquire") is True
    leader = client.leader(k)
    assert (leader.value, leader.session) == (b"guide-leader", guide.id)
    with pytest.raises(baton.ConflictError, match="flags 0") as e:
        client.election(k).campaign(b"me", timeout=1)
    assert "flags=0" in str(e.value)
    mine = client.election(k, flags=0)
    assert mine.campaign(b"me", timeout=0.3) is False  # the guide's client leads
    assert guide_put("release") is True
    assert mine.campaign(b"me", timeout=10)
    assert client.leader(k).value == b"me"
    assert guide_put("acquire") is False  # and now the guide's client waits
    assert mine.resign()
    guide.destroy()
