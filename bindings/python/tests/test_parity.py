"""Issue 22, Python findings: the same capabilities in sync Python and ``baton.aio``, safe
session defaults, errors a ``BatonError`` handler catches, and ``None`` meaning "no limit"
for every timeout. Against a real dev server (the ``devserver`` fixture)."""

import ast
import asyncio
import concurrent.futures
import inspect
import json
import pathlib
import queue
import threading
import time
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
WAIT = 10.0  # the failure bound of every wait


def key(name: str) -> str:
    return f"py-test/parity/{name}/{uuid.uuid4()}"


def session_info(devserver: str, sid: str) -> dict:
    with urllib.request.urlopen(f"http://{devserver}/v1/session/info/{sid}", timeout=5) as r:
        return json.load(r)[0]


def in_thread(fn):
    """Starts `fn` on a thread; returns a queue that gets ("ok", value) or ("err", exc)."""
    out: "queue.Queue" = queue.Queue()

    def run():
        try:
            out.put(("ok", fn()))
        except BaseException as e:  # noqa: B036
            out.put(("err", e))

    threading.Thread(target=run, daemon=True).start()
    return out


# --- release of something not held ------------------------------------------------------------


def test_release_of_a_lost_lock_raises_a_baton_error_that_is_a_runtime_error(client, session_ttl):
    s = client.create_session(ttl=session_ttl(10), lock_delay=0)
    lock = client.lock(key("lost"), session=s)
    assert lock.acquire(timeout=WAIT)
    s.destroy()
    assert lock.wait_lost(timeout=WAIT) == "session_lost"
    with pytest.raises(baton.BatonError) as info:
        lock.release()
    e = info.value
    assert isinstance(e, baton.NotHeldError) and isinstance(e, RuntimeError)
    assert e.code == "BATON_NOT_HELD"
    # The core's words, as every language says them: lost, and the session's own reason.
    assert "lost (session_lost (destroyed))" in str(e) and lock.key in str(e)

    never = client.lock(key("never"))
    with pytest.raises(RuntimeError, match="never acquired, or already released"):
        never.release()
    sem = client.semaphore(key("sem"), 2)
    with pytest.raises(baton.NotHeldError, match="semaphore"):
        sem.release()


def test_aio_release_of_an_unheld_lock_raises_not_held(devserver):
    async def main():
        async with baton.aio.Client(devserver) as a:
            with pytest.raises(baton.NotHeldError) as info:
                await a.lock(key("aio")).release()
            assert isinstance(info.value, RuntimeError) and info.value.code == "BATON_NOT_HELD"

    asyncio.run(main())


# --- values: bytes or str ---------------------------------------------------------------------


def test_values_accept_str_stored_utf8(client):
    k = key("str")
    lock = client.lock(k, value="héllo")
    assert lock.value == "héllo".encode()
    assert lock.acquire(timeout=WAIT)
    assert client.kv_get(k) == "héllo".encode()
    lock.release()
    lock.value = "again"
    assert lock.value == b"again"

    assert client.kv_put(k + "-kv", "ü") is True
    assert client.kv_get(k + "-kv") == "ü".encode()

    el = client.election(key("el"))
    assert el.campaign("leader-1", timeout=WAIT)
    el.proclaim("leader-2")
    assert el.leader().value == b"leader-2"
    el.resign()

    sem = client.semaphore(key("sem"), 1, value="s")
    assert sem.acquire(timeout=WAIT)
    sem.release()

    with pytest.raises(TypeError, match=r"value must be bytes or str .*got int"):
        client.lock(k, value=42)
    with pytest.raises(TypeError, match="bytes or str"):
        client.kv_put(k, 3.5)


# --- timeouts: None is "no limit" everywhere ----------------------------------------------------


def test_none_timeout_means_no_limit_everywhere(devserver):
    c = baton.Client(devserver)
    lock = c.lock(key("none"))
    assert lock.acquire(timeout=None) is True
    assert lock.locked()
    lock.release()
    assert lock.acquire(blocking=False, timeout=None) is True
    lock.release()
    sem = c.semaphore(key("sem"), 1)
    assert sem.acquire(timeout=None) is True
    sem.release()
    el = c.election(key("el"))
    assert el.campaign(b"x", timeout=None) is True
    assert el.resign() is True
    assert el.campaign(b"x", timeout=-1) is True  # -1 as for acquire
    el.resign()
    assert baton.CancelToken().wait(timeout=0) is False
    assert c.close(timeout=None) is True


# --- session defaults -------------------------------------------------------------------------


def test_create_session_defaults_to_ttl_15s_and_no_ttl_only_when_asked(client, devserver):
    s = client.create_session()
    info = session_info(devserver, s.id)
    assert info["TTL"] == "15s"
    assert info["LockDelay"] == 15_000_000_000  # Consul's default, in ns
    assert s.ttl == 15.0
    left = s.time_left()
    assert left is not None and 0 < left <= 15
    s.destroy()

    none = client.create_session(ttl=None)
    assert session_info(devserver, none.id)["TTL"] in ("", None)
    assert none.ttl is None and none.time_left() is None and none.valid_until() is None
    none.destroy()

    with pytest.raises(ValueError, match="ttl=None"):
        client.create_session(ttl=0)


def test_the_default_session_is_configurable(devserver, session_ttl):
    name = f"py-default-{uuid.uuid4()}"
    with baton.Client(devserver, default_session={"name": name, "ttl": session_ttl(20), "lock_delay": 0}) as c:
        s = c.default_session()
        info = session_info(devserver, s.id)
        assert info["Name"] == name and info["LockDelay"] == 0
        assert s.ttl == session_ttl(20)
    with baton.Client(devserver, default_session={}) as c:
        info = session_info(devserver, c.default_session().id)
        assert info["Name"] == "baton" and info["TTL"] == "15s"
    with pytest.raises(TypeError, match=r'unknown default_session option "ttl_ms" \(did you mean ttl\? durations are in seconds\)'):
        baton.Client(devserver, default_session={"ttl_ms": 10})


def test_session_deadline_and_cancel_token(client, session_ttl):
    s = client.create_session(ttl=session_ttl(10), lock_delay=0)
    until = s.valid_until()
    now = time.monotonic()
    assert until is not None and now < until <= now + 10
    token = s.cancel_token
    assert not token.cancelled()
    with pytest.raises(TypeError, match="cannot be cancelled by hand"):
        token.cancel()
    s.destroy()
    assert token.wait(timeout=WAIT) is True


# --- sync capabilities ------------------------------------------------------------------------


def test_kv_delete_leader_and_guarded_txn(client):
    k = key("kv")
    client.kv_put(k, b"v")
    assert client.kv_delete(k) is True
    assert client.kv_get(k) is None
    assert client.kv_delete(k) is True  # missing: not an error

    ek = key("leader")
    assert client.leader(ek) is None
    el = client.election(ek)
    assert el.campaign(b"me", timeout=WAIT)
    leader = client.leader(ek)
    assert leader is not None and leader.value == b"me"

    seq = el.sequencer
    data = key("data")
    entries = client.guarded_txn(seq, [
        {"verb": "set", "key": data, "value": "one"},
        {"verb": "get", "key": data},
    ])
    assert [e.key for e in entries] == [data, data]
    assert entries[1].value == b"one"
    el.resign()
    with pytest.raises(baton.ConflictError, match="stale sequencer"):
        client.guarded_txn(seq, [{"verb": "set", "key": data, "value": b"two"}])
    assert client.kv_get(data) == b"one"
    with pytest.raises(ValueError, match='unknown verb "put"'):
        client.guarded_txn(seq, [{"verb": "put", "key": data}])
    with pytest.raises(TypeError, match='unknown key "val"'):
        client.guarded_txn(seq, [{"verb": "set", "key": data, "val": b"x"}])


def test_semaphore_wait_lost_and_cancel_tokens_of_holdings(client, session_ttl):
    s = client.create_session(ttl=session_ttl(10), lock_delay=0)
    sem = client.semaphore(key("sem"), 2, session=s)
    assert sem.wait_lost(timeout=0) == "released"  # not held: at once
    assert sem.acquire(timeout=WAIT)
    token = sem.cancel_token
    assert not token.cancelled()
    with pytest.raises(baton.TimeoutError):
        sem.wait_lost(timeout=0.05)
    s.destroy()
    assert sem.wait_lost(timeout=WAIT) == "session_lost"
    assert token.cancelled()

    lock = client.lock(key("lock"))
    assert lock.cancel_token.cancelled()  # not held
    assert lock.acquire(timeout=WAIT)
    t = lock.cancel_token
    assert not t.cancelled()
    lock.release()
    assert t.wait(timeout=WAIT) is True

    el = client.election(key("el"))
    assert el.cancel_token.cancelled()
    assert el.campaign(b"x", timeout=WAIT)
    t = el.cancel_token
    assert not t.cancelled()
    el.resign()
    assert t.cancelled()


def test_cancel_token_cancels_blocking_calls_from_another_thread(client, devserver, ticker):
    k = key("cancel")
    holder = client.lock(k)
    assert holder.acquire(timeout=WAIT)
    with baton.Client(devserver) as other:
        waiter = other.lock(k)
        token = baton.CancelToken()
        with ticker() as ticks:
            out = in_thread(lambda: waiter.acquire(cancel=token))
            with pytest.raises(queue.Empty):
                out.get(timeout=0.2)  # waits: the lock is held
            token.cancel()
            how, what = out.get(timeout=WAIT)
        assert how == "err" and isinstance(what, baton.CancelledError), what
        assert not waiter.locked()
        assert len(ticks) > 5  # the GIL was not held while waiting

        # A token cancelled before the call ends it at once; others are not affected.
        with pytest.raises(baton.CancelledError):
            waiter.acquire(timeout=WAIT, cancel=token)
        el = other.election(key("el"))
        t2 = baton.CancelToken()
        out = in_thread(lambda: holder.wait_lost(cancel=t2))
        t2.cancel()
        how, what = out.get(timeout=WAIT)
        assert how == "err" and isinstance(what, baton.CancelledError)
        assert holder.locked()
        assert el.campaign(b"x", timeout=WAIT, cancel=baton.CancelToken())
        obs = el.observe()
        assert obs.next(timeout=WAIT).value == b"x"  # the current state
        t3 = baton.CancelToken()
        out = in_thread(lambda: obs.next(cancel=t3))  # no change comes
        t3.cancel()
        how, what = out.get(timeout=WAIT)
        assert how == "err" and isinstance(what, baton.CancelledError), what
        s = other.default_session()
        t4 = baton.CancelToken()
        out = in_thread(lambda: s.wait_lost(cancel=t4))
        t4.cancel()
        how, what = out.get(timeout=WAIT)
        assert how == "err" and isinstance(what, baton.CancelledError)
    holder.release()


def test_on_lost_callbacks_can_be_removed(client, session_ttl):
    s = client.create_session(ttl=session_ttl(10), lock_delay=0)
    lock = client.lock(key("cb"), session=s)
    assert lock.acquire(timeout=WAIT)
    removed, kept = [], queue.Queue()
    rid = lock.on_lost(removed.append)
    kid = lock.on_lost(kept.put)
    assert isinstance(rid, int) and rid != kid
    assert lock.remove_callback(rid) is True
    assert lock.remove_callback(rid) is False
    srid = s.on_lost(removed.append)
    skept = queue.Queue()
    s.on_lost(skept.put)
    assert s.remove_callback(srid) is True
    s.destroy()
    # Callbacks run in registration order on one thread: the removed one would have run first.
    assert kept.get(timeout=WAIT) == "session_lost"
    assert removed == []
    # A destroyed session's own callbacks are not called; its removal is what was checked.
    el = client.election(key("el"))
    eid = el.on_lost(removed.append)
    assert el.remove_callback(eid) is True
    sem = client.semaphore(key("sem"), 1)
    assert sem.remove_callback(sem.on_lost(removed.append)) is True


# --- baton.aio --------------------------------------------------------------------------------


def test_aio_client_has_sessions_kv_leader_and_fencing(devserver):
    async def main():
        async with baton.aio.Client(devserver) as a:
            loop_thread = threading.get_ident()
            k = key("aio-kv")
            assert await a.kv_put(k, "v") is True
            assert await a.kv_get(k) == b"v"
            assert await a.kv_delete(k) is True
            assert await a.kv_get(k) is None

            s = await a.default_session()
            assert s.is_valid() and s.ttl == 15.0
            ek = key("aio-leader")
            assert await a.leader(ek) is None
            el = a.election(ek)
            assert await el.campaign("me", timeout=WAIT)
            assert (await a.leader(ek)).value == b"me"
            seq = el.sequencer
            assert await a.check_sequencer(seq) is True
            data = key("aio-data")
            await a.guarded_put(seq, data, "one")
            entries = await a.guarded_txn(seq, [{"verb": "get", "key": data}])
            assert entries[0].value == b"one"
            await el.resign()
            assert await a.check_sequencer(seq) is False
            with pytest.raises(baton.ConflictError):
                await a.guarded_put(seq, data, b"two")

            own = await a.create_session(lock_delay=0)
            assert own.ttl == 15.0
            with pytest.raises(ValueError, match="ttl"):
                await a.create_session(ttl=-1)
            none = await a.create_session(ttl=None)
            assert none.ttl is None
            await a.destroy_session(none)
            adopted = await a.adopt_session(own.id)
            assert adopted.id == own.id
            waiting = asyncio.ensure_future(a.wait_session_lost(own, timeout=WAIT))
            await a.destroy_session(own)
            assert await waiting == "destroyed"

            sem = a.semaphore(key("aio-sem"), 1)
            async with sem:
                assert not sem.cancel_token.cancelled()
            assert await sem.wait_lost(timeout=0) == "released"
            assert threading.get_ident() == loop_thread

    asyncio.run(asyncio.wait_for(main(), 30))


class _RefusingExecutor(concurrent.futures.ThreadPoolExecutor):
    """A default executor that fails any use: baton.aio must not wait in it."""

    def submit(self, fn, /, *args, **kwargs):
        raise AssertionError(f"baton.aio used the loop's default executor for {fn!r}")


def test_aio_never_uses_the_default_executor(devserver):
    async def main():
        asyncio.get_running_loop().set_default_executor(_RefusingExecutor())
        a = baton.aio.Client(devserver)
        s = await a.create_session(lock_delay=0)
        await a.adopt_session(s.id)
        await a.default_session()
        await a.kv_put(key("ex"), b"x")
        await a.kv_get(key("ex"))
        await a.kv_delete(key("ex"))
        await a.leader(key("ex"))
        check = f"py-parity-{uuid.uuid4()}"
        await a.agent.check_register(check, 30.0, status="passing")
        await a.agent.check_pass(check)
        await a.agent.check_deregister(check)
        await a.destroy_session(s)
        assert await a.close() is True

    asyncio.run(asyncio.wait_for(main(), 30))


# --- stubs ------------------------------------------------------------------------------------

STUB = pathlib.Path(baton.__file__).with_name("_native.pyi")


def _stub_classes() -> dict:
    tree = ast.parse(STUB.read_text())
    out = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            out[node.name] = (node, names)
    return out


def test_stubs_cover_every_public_method_and_state_units():
    classes = _stub_classes()
    import consul_baton._native as native

    for name in [
        "Client", "Session", "Agent", "Lock", "Semaphore", "Election", "Observer", "Leader",
        "Sequencer", "CancelToken", "KvEntry", "Pending", "WarmCall",
    ]:
        assert name in classes, f"{name} missing from _native.pyi"
        runtime = {n for n in dir(getattr(native, name)) if not n.startswith("_")}
        missing = runtime - classes[name][1]
        assert not missing, f"{name}: {sorted(missing)} missing from _native.pyi"
    # Every parameter that is a duration says its unit where it is documented.
    text = STUB.read_text()
    for param in ["ttl", "lock_delay", "timeout", "request_timeout"]:
        assert f"``{param}``" in text or f"`{param}`" in text, param
    for cls, (node, _) in classes.items():
        for item in node.body:
            if not isinstance(item, ast.FunctionDef):
                continue
            params = [a.arg for a in item.args.args + item.args.kwonlyargs]
            if {"timeout", "ttl", "lock_delay"} & set(params):
                doc = ast.get_docstring(item) or ast.get_docstring(node) or ""
                assert "second" in doc, f"{cls}.{item.name}: no unit (seconds) in its docstring"
