"""Read-write locks, multi-key locks, leader tasks, group membership, barriers and counters
from Python (the synchronous API), against a dev server."""

import threading
import time
import urllib.request
import uuid

import pytest

import consul_baton as baton


def key(name: str) -> str:
    return f"py-more/{name}/{uuid.uuid4()}"


def eventually(cond, within: float = 10.0, what: str = "condition"):
    """Polls `cond()` until true, failing after `within` seconds."""
    end = time.monotonic() + within
    while not cond():
        assert time.monotonic() < end, f"{what} not met within {within} s"
        time.sleep(0.01)


def in_thread(fn, *args):
    """Runs `fn(*args)` in a thread; returns (thread, result dict with 'value' or 'error')."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def destroy_session(devserver: str, session_id: str) -> None:
    req = urllib.request.Request(f"http://{devserver}/v1/session/destroy/{session_id}", method="PUT")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


# --- read-write lock --------------------------------------------------------------------------


def test_rwlock_readers_share_and_writers_exclude(client, devserver):
    p = key("rw")
    other = baton.Client(devserver)
    try:
        r1, r2 = client.read_lock(p), other.read_lock(p)
        assert r1.mode == "read" and r1.prefix == p and r1.key is None
        assert r1.acquire(timeout=5) and r2.acquire(timeout=5), "readers hold together"
        assert r1.locked() and r2.locked()
        assert r1.sequencer.token != r2.sequencer.token
        w = other.write_lock(p)
        assert w.mode == "write"
        assert w.acquire(blocking=False) is False
        assert w.acquire(timeout=0.3) is False, "a writer waits while readers hold"
        r1.release()
        assert w.acquire(timeout=0.3) is False, "one reader still holds"
        r2.release()
        assert w.acquire(timeout=5) is True
        assert client.read_lock(p).acquire(timeout=0.3) is False, "a reader waits for the writer"
        with pytest.raises(baton.NotHeldError):
            r1.release()
        w.release()
        with client.read_lock(p) as held:
            assert held is True
        assert w.lost_reason == "released"
    finally:
        other.close()


def test_rwlock_waiting_writer_is_not_starved_by_new_readers(client, devserver):
    p = key("rw-starve")
    other = baton.Client(devserver)
    try:
        first = client.read_lock(p)
        assert first.acquire(timeout=5)
        writer = other.write_lock(p)
        t, out = in_thread(writer.acquire, True, 10)
        # The writer queues its contender key behind the reader.
        eventually(lambda: _contenders(devserver, p) >= 2, what="the writer queued")
        late = client.read_lock(p)
        assert late.acquire(timeout=0.5) is False, "a later reader must wait behind the writer"
        assert t.is_alive(), "the writer still waits for the first reader"
        first.release()
        t.join(10)
        assert out.get("value") is True, out
        assert writer.locked()
        writer.release()
        assert late.acquire(timeout=5) is True
        late.release()
    finally:
        other.close()


def _contenders(devserver: str, prefix: str) -> int:
    import json
    try:
        with urllib.request.urlopen(f"http://{devserver}/v1/kv/{prefix}/?keys", timeout=5) as r:
            return len(json.load(r))
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return 0
        raise


def test_rwlock_loss_and_wait_lost(client, devserver):
    p = key("rw-loss")
    w = client.write_lock(p)
    assert w.acquire(timeout=5)
    reasons = []
    w.on_lost(reasons.append)
    token = w.cancel_token
    assert not token.cancelled()
    destroy_session(devserver, w.sequencer.session)
    assert w.wait_lost(timeout=10) == "session_lost"
    assert token.wait(5)
    assert not w.locked()
    eventually(lambda: reasons == ["session_lost"], what="on_lost ran")


# --- multi-key lock ---------------------------------------------------------------------------



def refused_before_1_6_2(consul_before, client, keys) -> bool:
    """Before Consul 1.6.2 a transaction stores numbers through a float64, so Go's lock flags
    (above 2^53) cannot be written exactly: the multi-key lock refuses, naming it. Checks that
    refusal there; returns whether the server is such a Consul (the test then has nothing else
    to prove)."""
    if not consul_before("1.6.2"):
        return False
    with pytest.raises(baton.UnsupportedError, match="before 1.6.2"):
        client.multi_lock(keys).acquire(timeout=5)
    return True

def test_multilock_waits_for_a_key_held_by_a_lock_and_never_holds_part(
    client, devserver, consul_before
):
    k1, k2 = key("m1"), key("m2")
    if refused_before_1_6_2(consul_before, client, [k1, k2]):
        return
    other = baton.Client(devserver)
    try:
        plain = other.lock(k2)
        assert plain.acquire(timeout=5)
        multi = client.multi_lock([k2, k1, k1], value=b"both")
        assert multi.keys == sorted([k1, k2])
        assert multi.acquire(blocking=False) is False
        t, out = in_thread(multi.acquire, True, 10)
        # While it waits, the free key is never taken (all or none).
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            entry = client.kv_get_entry(k1)
            assert entry is None or entry.session is None, "holds part of the set"
            assert t.is_alive()
            time.sleep(0.02)
        plain.release()
        t.join(10)
        assert out.get("value") is True, out
        assert multi.locked()
        seqs = multi.sequencers
        assert [s.key for s in seqs] == sorted([k1, k2])
        assert client.kv_get(k1) == b"both"
        assert other.lock(k1).acquire(timeout=0.2) is False
        multi.release()
        assert not multi.locked() and multi.lost_reason == "released"
        with pytest.raises(baton.NotHeldError):
            multi.release()
        with multi:
            assert multi.locked()
        assert not multi.locked()
    finally:
        other.close()


def test_multilock_loss_of_one_key_ends_the_holding(client, devserver, consul_before):
    k1, k2 = key("ml1"), key("ml2")
    if refused_before_1_6_2(consul_before, client, [k1, k2]):
        return
    multi = client.multi_lock([k1, k2])
    assert multi.acquire(timeout=5)
    client.kv_delete(k2)
    assert multi.wait_lost(timeout=10) in ("key_changed", "removed")
    assert not multi.locked()
    assert multi.cancel_token.cancelled()
    with pytest.raises(baton.InvalidArgumentError):
        client.multi_lock([])


# --- leader task ------------------------------------------------------------------------------


def test_leader_task_token_fires_when_the_session_is_destroyed(client, devserver):
    k = key("lt")
    started, stopped, leaders = [], [], []
    lt = client.leader_task(
        k, b"me", requeue=False,
        on_started_leading=lambda: started.append(1),
        on_stopped_leading=stopped.append,
        on_new_leader=leaders.append,
    )
    in_task = threading.Event()
    seen = {}

    def task(token):
        seen["seq"] = lt.sequencer
        in_task.set()
        assert token.wait(20), "the token did not fire"
        seen["fired"] = True
        return "ignored"

    t, out = in_thread(lt.run, task)
    assert in_task.wait(10)
    assert lt.is_leader() and started == [1]
    destroy_session(devserver, seen["seq"].session)
    t.join(20)
    assert not t.is_alive()
    assert "error" not in out, out
    assert seen.get("fired") is True
    assert stopped == ["lost"]
    assert not lt.is_leader()
    eventually(lambda: any(l is not None and l.value == b"me" for l in leaders),
               what="on_new_leader saw us")


def test_leader_task_requeues_and_stop_ends_it(client, devserver):
    k = key("lt-requeue")
    stop = baton.CancelToken()
    terms, stopped = [], []
    lt = client.leader_task(k, "me", requeue_delay=0.05, on_stopped_leading=stopped.append)

    def task(token):
        terms.append(lt.sequencer.token)
        if len(terms) == 3:
            stop.cancel()
            assert token.wait(5), "stop fires the task's token"

    lt.run(task, stop)
    assert len(terms) == 3 and terms == sorted(terms) and len(set(terms)) == 3
    assert stopped[:2] == ["returned", "returned"] and stopped[2] == "stopped"
    assert not lt.is_leader()
    assert client.leader(k) is None


def test_leader_task_failure_without_requeue_raises_the_tasks_exception(client):
    lt = client.leader_task(key("lt-fail"), b"x", requeue=False)

    def task(token):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        lt.run(task)
    assert not lt.is_leader()
    with pytest.raises(TypeError):
        lt.run(3)
    with pytest.raises(TypeError):
        client.leader_task(key("x"), b"", on_new_leader=5)


def test_leader_task_stop_while_campaigning(client, devserver):
    k = key("lt-stop")
    other = baton.Client(devserver)
    try:
        holder = other.election(k)
        assert holder.campaign(b"other", timeout=5)
        lt = client.leader_task(k, b"me")
        stop = baton.CancelToken()
        ran = []
        t, out = in_thread(lt.run, ran.append, stop)
        t.join(0.3)
        assert t.is_alive(), "it campaigns while another leads"
        stop.cancel()
        t.join(10)
        assert not t.is_alive() and out == {"value": None} and ran == []
    finally:
        other.close()


# --- group membership -------------------------------------------------------------------------


def test_group_join_members_and_watch(client, devserver):
    p = key("group")
    other = baton.Client(devserver)
    try:
        group = client.group(p)
        assert group.prefix == p
        watch = group.watch()
        first = watch.next(timeout=10)
        assert first.kind == "snapshot" and first.members == []
        a = group.join("a", b"10.0.0.1")
        assert a.id == "a" and a.key == f"{p}/a" and a.is_member()
        ev = watch.next(timeout=10)
        assert ev.kind == "joined" and ev.id == "a" and ev.member.value == b"10.0.0.1"
        with pytest.raises(baton.ConflictError):
            other.group(p).join("a", b"x")
        with other.group(p).join("b", "10.0.0.2") as b:
            ev = watch.next(timeout=10)
            assert ev.kind == "joined" and ev.id == "b"
            members = group.members()
            assert [m.id for m in members] == ["a", "b"]
            assert members[1].value == b"10.0.0.2" and members[1].session == b.session.id
            assert members[0].create_index < members[1].create_index
        ev = watch.next(timeout=10)
        assert ev.kind == "left" and ev.id == "b", "leaving on exit"
        assert b.lost_reason == "left" and not b.is_member()
        a.update_value(b"10.0.0.9")
        ev = watch.next(timeout=10)
        assert ev.kind == "updated" and ev.member.value == b"10.0.0.9"
        assert watch.next(timeout=0.2) is None
        # A member whose client closes leaves.
        c = other.group(p).join("c", b"")
        assert watch.next(timeout=10).kind == "joined"
        other.close()
        ev = watch.next(timeout=10)
        assert ev.kind == "left" and ev.id == "c"
        assert c.lost_reason == "session_lost"
        assert [m.id for m in watch.members()] == ["a"]
        assert a.leave() is True and a.leave() is False
        assert a.wait_lost(timeout=1) == "left" and a.cancel_token.cancelled()
        watch.close()
        with pytest.raises(baton.ClosedError):
            watch.next(timeout=1)
    finally:
        other.close()


def test_member_loses_membership_when_its_session_is_destroyed(client, devserver):
    group = client.group(key("group-loss"))
    m = group.join("solo", b"v")
    t, out = in_thread(m.wait_lost, 10)
    destroy_session(devserver, m.session.id)
    t.join(10)
    assert out.get("value") == "session_lost", out
    assert m.lost_session_reason == "invalidated"  # destroyed by someone else
    with pytest.raises(baton.ConflictError):
        m.update_value(b"late")


# --- barriers ---------------------------------------------------------------------------------


def test_barrier_wait_is_released_or_times_out(client, devserver):
    k = key("barrier")
    other = baton.Client(devserver)
    try:
        b = client.barrier(k)
        assert b.key == k
        assert b.wait(timeout=0) is True, "not raised: no wait"
        assert b.hold() is True and b.hold() is False
        assert b.is_held()
        assert other.barrier(k).wait(timeout=0.3) is False
        t, out = in_thread(other.barrier(k).wait, 10)
        t.join(0.2)
        assert t.is_alive()
        assert other.barrier(k).release() is True
        t.join(10)
        assert out.get("value") is True, out
        assert not b.is_held() and b.release() is False
        cancel = baton.CancelToken()
        b.hold()
        t, out = in_thread(lambda: b.wait(None, cancel=cancel))
        cancel.cancel()
        t.join(10)
        assert isinstance(out.get("error"), baton.CancelledError), out
        b.release()
    finally:
        other.close()


def test_double_barrier_of_two(client, devserver):
    p = key("double")
    other = baton.Client(devserver)
    try:
        a, b = client.double_barrier(p, 2), other.double_barrier(p, 2)
        assert a.count == 2 and a.prefix == p
        assert a.enter(timeout=0.3) is False, "alone: the round does not open"
        assert not a.is_entered()
        ta, oa = in_thread(a.enter, 10)
        tb, ob = in_thread(b.enter, 10)
        ta.join(10), tb.join(10)
        assert oa.get("value") is True and ob.get("value") is True, (oa, ob)
        assert a.is_entered() and b.is_entered()
        assert a.leave(timeout=0.3) is False, "the other has not left"
        assert b.leave(timeout=10) is True
        with pytest.raises(baton.ConflictError):
            a.leave(timeout=1)
        # The context manager: enter on entry, leave on exit.
        done = []

        def round_trip(barrier, name):
            with barrier:
                done.append(name)
            return barrier.is_entered()

        ta, oa = in_thread(round_trip, a, "a")
        tb, ob = in_thread(round_trip, b, "b")
        ta.join(10), tb.join(10)
        assert oa.get("value") is False and ob.get("value") is False, (oa, ob)
        assert sorted(done) == ["a", "b"]
        with pytest.raises(baton.InvalidArgumentError):
            client.double_barrier(p, 0)
    finally:
        other.close()


# --- counter ----------------------------------------------------------------------------------


def test_counter_adds_and_cas_race_across_two_clients(client, devserver):
    k = key("counter")
    other = baton.Client(devserver)
    try:
        c1, c2 = client.counter(k), other.counter(k)
        assert c1.key == k and c1.get() == 0 and c1.get_with_index() == (0, 0)
        n = 25

        def adds(c):
            for _ in range(n):
                c.increment()

        threads = [in_thread(adds, c) for c in (c1, c2, c1, c2)]
        for t, out in threads:
            t.join(60)
            assert "error" not in out, out
        assert c1.get() == 4 * n
        assert c2.add(-10) == 4 * n - 10 and c2.decrement() == 4 * n - 11
        c1.set(7)
        assert c2.get() == 7
        # Two clients race to move 7 -> their own value: exactly one wins.
        barrier = threading.Barrier(2)

        def cas(c, new):
            barrier.wait()
            return c.compare_and_set(7, new)

        (t1, o1), (t2, o2) = in_thread(cas, c1, 100), in_thread(cas, c2, 200)
        t1.join(10), t2.join(10)
        assert sorted([o1["value"], o2["value"]]) == [False, True]
        assert c1.get() == (100 if o1["value"] else 200)
        assert c1.compare_and_set(0, 1) is False
        c1.set(2**63 - 1)
        with pytest.raises(baton.InvalidArgumentError, match="overflows"):
            c1.add(1)
        assert c1.get() == 2**63 - 1
        client.kv_delete(k)
    finally:
        other.close()


def test_counter_watch(client, devserver):
    k = key("counter-watch")
    other = baton.Client(devserver)
    try:
        c = client.counter(k)
        w = other.counter(k).watch()
        assert w.next(timeout=10) == 0
        assert w.next(timeout=0.2) is None
        c.add(5)
        assert w.next(timeout=10) == 5
        t, out = in_thread(w.next, 10)
        c.set(9)
        t.join(10)
        assert out.get("value") == 9, out
        c.add(1)
        assert next(iter(w)) == 10
        w.close()
        with pytest.raises(baton.ClosedError):
            w.next(timeout=1)
        client.kv_delete(k)
    finally:
        other.close()


# --- Ctrl-C -----------------------------------------------------------------------------------


def _sigint_after(seconds: float) -> threading.Timer:
    import os
    import signal
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_ctrl_c_interrupts_waits_of_the_new_recipes(client, devserver, sigint_handled):
    """On the main thread, Ctrl-C ends a blocked read-lock acquire (nothing left queued), a
    barrier wait, a watch's next and a leader task's campaign, and during the task's term it
    stops the task (resigned)."""
    p = key("sigint-rw")
    other = baton.Client(devserver)
    try:
        w = other.write_lock(p)
        assert w.acquire(timeout=5)
        r = client.read_lock(p)
        _sigint_after(0.2)
        with pytest.raises(KeyboardInterrupt):
            r.acquire(timeout=30)
        assert not r.locked()
        eventually(lambda: _contenders(devserver, p) == 1, what="the reader's key removed")

        b = other.barrier(key("sigint-b"))
        assert b.hold()
        _sigint_after(0.2)
        with pytest.raises(KeyboardInterrupt):
            client.barrier(b.key).wait(timeout=30)
        b.release()

        watch = client.counter(key("sigint-c")).watch()
        assert watch.next(timeout=10) == 0
        _sigint_after(0.2)
        with pytest.raises(KeyboardInterrupt):
            watch.next(timeout=30)

        k = key("sigint-lt")
        e = other.election(k)
        assert e.campaign(b"other", timeout=5)
        lt = client.leader_task(k, b"me")
        _sigint_after(0.2)
        with pytest.raises(KeyboardInterrupt):
            lt.run(lambda token: None)
        e.resign()
        assert client.leader(k) is None, "nothing campaigns after Ctrl-C"

        # Ctrl-C while the task runs: it reaches the task (Python code on this thread), the
        # term ends and run raises it, resigned.
        in_term = []

        def task(token):
            in_term.append(1)
            _sigint_after(0.2)
            token.wait(30)

        with pytest.raises(KeyboardInterrupt):
            lt.run(task)
        assert in_term == [1] and not lt.is_leader()
        assert client.leader(k) is None
    finally:
        other.close()


def test_stubs_cover_the_new_classes():
    """Every public method of the new classes is in _native.pyi, and every `timeout` there
    says its unit; `baton` and `baton.aio` export them."""
    import ast
    import pathlib
    import consul_baton._native as native
    import consul_baton.aio as aio

    stub = pathlib.Path(baton.__file__).with_name("_native.pyi")
    classes = {}
    for node in ast.parse(stub.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names = {i.name for i in node.body if isinstance(i, ast.FunctionDef)}
            classes[node.name] = (node, names)
    new = ["RwLock", "MultiLock", "LeaderTask", "Group", "Member", "MemberInfo", "MembersWatch",
           "MembershipEvent", "Barrier", "DoubleBarrier", "Counter", "CounterWatch"]
    for name in new + ["Client"]:
        assert name in classes, name
        runtime = {n for n in dir(getattr(native, name)) if not n.startswith("_")}
        missing = runtime - classes[name][1]
        assert not missing, f"{name}: {sorted(missing)} missing from _native.pyi"
        if name != "Client":
            assert getattr(baton, name) is getattr(native, name) and name in baton.__all__
    for name in new:
        node = classes[name][0]
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and "timeout" in [a.arg for a in item.args.args]:
                doc = ast.get_docstring(item) or ast.get_docstring(node) or ""
                assert "second" in doc, f"{name}.{item.name}: no unit in its docstring"
    for name in ["RwLock", "MultiLock", "LeaderTask", "Group", "Member", "MembersWatch", "Barrier",
                 "DoubleBarrier", "Counter", "CounterWatch"]:
        assert name in aio.__all__ and isinstance(getattr(aio, name), type)
