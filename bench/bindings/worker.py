"""The Python worker of `make bench-bindings` (bench/bindings/run.py drives it; same protocol as
worker.rs):

    worker.py ADDR cycles N KEY        N uncontended acquire+release cycles (baton, sync)
    worker.py ADDR handoff N KEY       N hand-offs between two holders (the waiter in a thread)
    worker.py ADDR aio-cycles N KEY    the same with baton.aio
    worker.py ADDR aio-handoff N KEY   the same with baton.aio (the waiter a task)
    worker.py ADDR aio-lag N PREFIX    asyncio loop lag while N acquires on N keys are pending
    worker.py ADDR aio-floor N KEY     N cycles of the floor client driven by the asyncio loop:
                                       the floor of worker.rs (two raw PUTs on one keep-alive
                                       connection, no checks) on an asyncio Protocol, no baton:
                                       what the loop costs above the wire

ADDR as worker.rs takes it: `HOST:PORT`, `https://HOST:PORT` or `unix:///PATH`. baton's clients
read `CONSUL_CACERT` from the environment over HTTPS, as an application's do; aio-floor trusts
the same CA file (an `ssl` context, asyncio's own TLS over OpenSSL) and reaches a unix socket
with `create_unix_connection`.

Prints one line, `RESULT {json}`; cycles and lag report `cpu_secs`, the process's user+sys CPU
time (`time.process_time`) over the measured part. aio-lag: one client holds PREFIX/0..N-1, another starts an
acquire of each, and a task sleeping 10 ms at a time records how late each wake-up is for
LAG_SECS seconds: `{"pending", "p50_ms", "p99_ms", "max_ms"}`.
"""

import asyncio
import json
import os
import ssl
import sys
import threading
import time

import consul_baton as baton
import consul_baton.aio  # baton.aio
LONG = 30.0
LAG_SECS = 3.0


def pct(sorted_values, p):
    if not sorted_values:
        return 0.0
    return sorted_values[round((len(sorted_values) - 1) * p)]


# Warm-up cycles before measuring (see run.py).
WARM = 300


def cycles(addr, n, key):
    with baton.Client(addr) as c:
        lock = c.lock(key)
        for _ in range(WARM):
            assert lock.acquire(timeout=LONG)
            lock.release()
        lat = []
        clock = time.perf_counter
        cpu = time.process_time()
        start = clock()
        for _ in range(n):
            t = clock()
            lock.acquire(timeout=LONG)
            lock.release()
            lat.append((clock() - t) * 1e6)
        secs = clock() - start
        cpu = time.process_time() - cpu
    lat.sort()
    return {"cycles": n, "secs": secs, "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
            "cpu_secs": cpu}


def handoff(addr, rounds, key):
    with baton.Client(addr) as a, baton.Client(addr) as b:
        la, lb = a.lock(key), b.lock(key)
        assert la.acquire(timeout=LONG)
        holder, waiter = la, lb
        lat = []
        for _ in range(rounds):
            acquired = []
            started = threading.Event()

            def wait(w=waiter):
                started.set()
                assert w.acquire(timeout=LONG)
                acquired.append(time.perf_counter())

            t = threading.Thread(target=wait, name="bench-waiter")
            t.start()
            started.wait()
            time.sleep(0.02)  # let the waiter find the key held and park on it
            released = time.perf_counter()
            holder.release()
            t.join()
            lat.append((acquired[0] - released) * 1e6)
            holder, waiter = waiter, holder
        holder.release()
    lat.sort()
    return {"rounds": rounds, "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99)}


async def aio_cycles(addr, n, key):
    async with baton.aio.Client(addr) as c:
        lock = c.lock(key)
        for _ in range(WARM):
            assert await lock.acquire(timeout=LONG)
            await lock.release()
        lat = []
        clock = time.perf_counter
        cpu = time.process_time()
        start = clock()
        for _ in range(n):
            t = clock()
            await lock.acquire(timeout=LONG)
            await lock.release()
            lat.append((clock() - t) * 1e6)
        secs = clock() - start
        cpu = time.process_time() - cpu
    lat.sort()
    return {"cycles": n, "secs": secs, "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
            "cpu_secs": cpu}


class _Floor(asyncio.Protocol):
    """aio-floor's connection: one request at a time, its answer read to Content-Length."""

    def __init__(self):
        self.buf = b""
        self.waiting = None

    def data_received(self, data):
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        length = 0
        for line in self.buf[:end].split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buf) < end + 4 + length:
            return
        body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
        waiting, self.waiting = self.waiting, None
        waiting.set_result(body)

    def connection_lost(self, exc):
        if self.waiting is not None and not self.waiting.done():
            self.waiting.set_exception(exc or ConnectionError("connection closed"))


async def _floor_connection(loop, addr):
    """aio-floor's one connection to `addr` (see the module docs): (transport, protocol, the
    Host header)."""
    if addr.startswith("unix://"):
        transport, proto = await loop.create_unix_connection(_Floor, addr[len("unix://"):])
        return transport, proto, "localhost"
    tls = None
    if addr.startswith("https://"):
        tls = ssl.create_default_context(cafile=os.environ["CONSUL_CACERT"])
        addr = addr[len("https://"):]
    addr = addr.replace("http://", "")
    host, port = addr.rsplit(":", 1)
    transport, proto = await loop.create_connection(_Floor, host, int(port), ssl=tls)
    return transport, proto, addr


async def aio_floor(addr, n, key):
    loop = asyncio.get_running_loop()
    transport, proto, host = await _floor_connection(loop, addr)

    def put(path, body=b""):
        proto.waiting = loop.create_future()
        transport.write(b"PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s"
                        % (path.encode(), host.encode(), len(body), body))
        return proto.waiting

    sid = json.loads(await put("/v1/session/create", b'{"TTL":"60s","LockDelay":"0s"}'))["ID"]
    acquire, release = f"/v1/kv/{key}?acquire={sid}", f"/v1/kv/{key}?release={sid}"
    for _ in range(WARM):
        await put(acquire)
        await put(release)
    lat = []
    clock = time.perf_counter
    cpu = time.process_time()
    start = clock()
    for _ in range(n):
        t = clock()
        await put(acquire)
        await put(release)
        lat.append((clock() - t) * 1e6)
    secs = clock() - start
    cpu = time.process_time() - cpu
    await put(f"/v1/session/destroy/{sid}")
    transport.close()
    lat.sort()
    return {"cycles": n, "secs": secs, "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99),
            "cpu_secs": cpu}


async def aio_handoff(addr, rounds, key):
    async with baton.aio.Client(addr) as a, baton.aio.Client(addr) as b:
        la, lb = a.lock(key), b.lock(key)
        assert await la.acquire(timeout=LONG)
        holder, waiter = la, lb
        lat = []
        for _ in range(rounds):
            async def wait(w=waiter):
                assert await w.acquire(timeout=LONG)
                return time.perf_counter()

            task = asyncio.create_task(wait())
            await asyncio.sleep(0.02)  # let the waiter find the key held and park on it
            released = time.perf_counter()
            await holder.release()
            lat.append((await task - released) * 1e6)
            holder, waiter = waiter, holder
        await holder.release()
    lat.sort()
    return {"rounds": rounds, "p50_us": pct(lat, 0.5), "p99_us": pct(lat, 0.99)}


async def aio_lag(addr, n, prefix):
    async with baton.aio.Client(addr) as a, baton.aio.Client(addr) as b:
        held = [a.lock(f"{prefix}/{i}") for i in range(n)]
        for lock in held:
            assert await lock.acquire(timeout=LONG)
        waiting = [b.lock(f"{prefix}/{i}") for i in range(n)]
        tasks = [asyncio.create_task(w.acquire(timeout=LONG)) for w in waiting]
        await asyncio.sleep(0.5)  # every acquire has found its key held
        assert not any(t.done() for t in tasks), "an acquire finished while its key was held"
        lags = []
        cpu = time.process_time()
        end = time.perf_counter() + LAG_SECS
        while time.perf_counter() < end:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append((time.perf_counter() - t - 0.01) * 1e3)
        cpu = time.process_time() - cpu
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for lock in held:
            await lock.release()
    lags.sort()
    return {"pending": n, "p50_ms": pct(lags, 0.5), "p99_ms": pct(lags, 0.99), "max_ms": lags[-1],
            "secs": LAG_SECS, "cpu_secs": cpu}


def main():
    if len(sys.argv) != 5:
        sys.exit("usage: worker.py ADDR cycles|handoff|aio-cycles|aio-handoff|aio-lag|aio-floor N KEY")
    addr, mode, n, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    modes = {
        "cycles": lambda: cycles(addr, n, key),
        "handoff": lambda: handoff(addr, n, key),
        "aio-cycles": lambda: asyncio.run(aio_cycles(addr, n, key)),
        "aio-handoff": lambda: asyncio.run(aio_handoff(addr, n, key)),
        "aio-lag": lambda: asyncio.run(aio_lag(addr, n, key)),
        "aio-floor": lambda: asyncio.run(aio_floor(addr, n, key)),
    }
    if mode not in modes:
        sys.exit(f"unknown mode {mode!r} ({', '.join(modes)})")
    print("RESULT " + json.dumps(modes[mode]()), flush=True)


if __name__ == "__main__":
    main()
