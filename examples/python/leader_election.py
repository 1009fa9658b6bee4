"""Leader election with asyncio (baton.aio): three candidates, one observer.

Each candidate campaigns; the leader prints its fencing token, works a little,
and resigns, so the next one takes over at once (a resign pays no lock-delay).
The observer prints every change it sees through `async for`. Ends when every
candidate has led once; exits non-zero if tokens did not grow.

    python examples/python/leader_election.py     (CONSUL_HTTP_ADDR, or its own dev server)
"""

import asyncio
import sys
import uuid

import consul_baton as baton

import consul_baton.aio  # baton.aio
from _target import consul_address


async def candidate(addr, key, name, tokens):
    async with baton.aio.Client(addr) as client:
        election = client.election(key)
        await election.campaign(name.encode())
        token = election.sequencer.token
        tokens.append(token)
        print(f"{name}: leading, fencing token {token}")
        await asyncio.sleep(0.3)  # the work of a leader
        await election.resign()
        print(f"{name}: resigned")


async def observer(addr, key, seen):
    async with baton.aio.Client(addr) as client:
        async for leader in client.election(key).observe():
            if leader is None:
                print("observer: no leader")
            else:
                print(f"observer: leader is {leader.value.decode()} (token {leader.token})")
                seen.add(leader.value.decode())


async def main(addr):
    key = f"examples/python/leader-{uuid.uuid4()}"
    tokens, seen = [], set()
    watching = asyncio.create_task(observer(addr, key, seen))
    await asyncio.gather(*(candidate(addr, key, n, tokens) for n in ("ada", "grace", "linus")))
    await asyncio.sleep(0.2)
    watching.cancel()
    try:
        await watching
    except asyncio.CancelledError:
        pass
    ok = tokens == sorted(tokens) and len(set(tokens)) == 3 and len(seen) == 3
    print(f"tokens {tokens}, observer saw {sorted(seen)}: {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    with consul_address() as addr:
        sys.exit(asyncio.run(main(addr)))
