"""KV check-and-set in Python and baton.aio (issue 22: the capability Rust had and the other
languages lacked): kv_get_entry gives the ModifyIndex, kv_put/kv_delete take cas=."""

import asyncio
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
def key(name: str) -> str:
    return f"py-test/kv-cas/{name}/{uuid.uuid4()}"


def test_put_and_delete_with_cas(client):
    k = key("sync")
    assert client.kv_get_entry(k) is None
    assert client.kv_put(k, b"one", cas=0, flags=42)  # 0: only if absent
    assert not client.kv_put(k, b"again", cas=0)
    e = client.kv_get_entry(k)
    assert isinstance(e, baton.KvEntry)
    assert (e.key, e.value, e.flags) == (k, b"one", 42)
    assert client.kv_put(k, "two", cas=e.modify_index)
    assert not client.kv_put(k, b"stale", cas=e.modify_index)
    assert client.kv_get(k) == b"two"
    current = client.kv_get_entry(k).modify_index
    assert not client.kv_delete(k, cas=e.modify_index)
    assert client.kv_get(k) == b"two"
    assert client.kv_delete(k, cas=current)
    assert client.kv_get_entry(k) is None
    with pytest.raises(OverflowError):
        client.kv_put(k, b"x", cas=-1)
    with pytest.raises(TypeError):
        client.kv_put(k, b"x", 0)  # flags and cas are keyword-only


def test_aio_put_and_delete_with_cas(devserver):
    async def main():
        async with baton.aio.Client(devserver) as c:
            k = key("aio")
            assert await c.kv_get_entry(k) is None
            assert await c.kv_put(k, b"one", cas=0)
            assert not await c.kv_put(k, b"again", cas=0)
            e = await c.kv_get_entry(k)
            assert e.value == b"one"
            assert await c.kv_put(k, b"two", cas=e.modify_index, flags=7)
            assert not await c.kv_delete(k, cas=e.modify_index)
            e2 = await c.kv_get_entry(k)
            assert (e2.value, e2.flags) == (b"two", 7)
            assert await c.kv_delete(k, cas=e2.modify_index)
            assert await c.kv_get(k) is None

    asyncio.run(main())
