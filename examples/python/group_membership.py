"""Group membership with asyncio (baton.aio): workers join a group, a watcher follows it.

Three workers join `examples/python/group-...` with their addresses. The watcher prints the
snapshot, then every join and leave. One worker leaves on purpose (`async with` exits), one
is dropped out when its client closes (its session ends with it). Exits non-zero unless the
watcher saw every join and both leaves, and `members()` ends with the one worker left.

    python examples/python/group_membership.py     (CONSUL_HTTP_ADDR, or its own dev server)
"""

import asyncio
import sys
import uuid

import consul_baton as baton

import consul_baton.aio  # baton.aio
from _target import consul_address


async def watcher(watch, seen, want):
    async for ev in watch:
        print(f"watcher: {ev.id} {ev.kind}" + (f" at {ev.member.value.decode()}" if ev.member else ""))
        seen.append((ev.kind, ev.id))
        if sum(1 for kind, _ in seen if kind == "left") == want:
            return


async def main(addr):
    prefix = f"examples/python/group-{uuid.uuid4()}"
    seen = []
    async with baton.aio.Client(addr) as observer:
        group = observer.group(prefix)
        watch = group.watch()
        snapshot = await watch.next()  # the members before anyone joins
        print(f"watcher: members now {[m.id for m in snapshot.members]}")
        watching = asyncio.create_task(watcher(watch, seen, want=2))
        a, b = baton.aio.Client(addr), baton.aio.Client(addr)
        ada = await a.group(prefix).join("ada", "10.0.0.1:8080")
        async with await b.group(prefix).join("grace", "10.0.0.2:8080"):
            linus = await observer.group(prefix).join("linus", "10.0.0.3:8080")
            print("members:", [(m.id, m.value.decode()) for m in await group.members()])
        print("grace left")
        await a.close()  # ada is dropped out: her session ends with her client
        print("ada's client closed")
        await asyncio.wait_for(watching, 30)
        left = [m.id for m in await group.members()]
        await linus.leave()
        await b.close()
    joined = sorted(i for kind, i in seen if kind == "joined")
    gone = sorted(i for kind, i in seen if kind == "left")
    ok = joined == ["ada", "grace", "linus"] and gone == ["ada", "grace"] and left == ["linus"]
    print(f"joined {joined}, left {gone}, still there {left}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    with consul_address() as addr:
        sys.exit(asyncio.run(main(addr)))
