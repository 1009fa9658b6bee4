"""The Python worker of `make bench-scale` (bench/scale/run.py drives it; same protocol as
worker.js and the Rust worker, src/main.rs):

    worker.py ADDR pending N KEY TIMEOUT   N baton.aio acquires of KEY (held by another process)
                                           with TIMEOUT seconds each, all pending at once
    worker.py ADDR held N NAMES HOLD       N locks held for HOLD seconds (sync client), named by
                                           NAMES: "prefixed" (scale/<run>/k-i), "flat"
                                           (<run>-k-i: no common prefix), "segments"
                                           (<run>-i/lock: a distinct first segment each)
                                           or "random" (a UUID each: nothing shared)

Prints one line, `RESULT {json}`: threads of the process (before, peak while pending or held,
after close), sockets (open socket descriptors), RSS in KiB, and what happened to the calls.
"""

import asyncio
import json
import os
import sys
import time
import uuid

import consul_baton as baton
import consul_baton.aio  # noqa: F401  (baton.aio)


def threads():
    return len(os.listdir("/proc/self/task"))


def sockets():
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def pct(sorted_values, p):
    return sorted_values[round((len(sorted_values) - 1) * p)] if sorted_values else 0.0


async def pending(addr, n, key, timeout):
    async with baton.aio.Client(addr) as c:
        warm = c.lock(key + "-warm")
        assert await warm.acquire(timeout=10)
        await warm.release()
        base_threads, base_rss = threads(), rss_kib()
        locks = [c.lock(key) for _ in range(n)]
        lags, ends = [], []
        loop = asyncio.get_running_loop()

        async def one(lock):
            t0 = loop.time()
            got = await lock.acquire(timeout=timeout)
            ends.append(loop.time() - t0 - timeout)
            return got

        started = time.perf_counter()
        tasks = [asyncio.ensure_future(one(lk)) for lk in locks]
        await asyncio.sleep(0)
        start_secs = time.perf_counter() - started
        peak_threads, peak_rss = threads(), rss_kib()
        # Loop lag while they wait: a task sleeping 10 ms at a time, until 1 s before the end.
        until = time.perf_counter() + max(0.5, timeout - 1.0)
        while time.perf_counter() < until:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append((time.perf_counter() - t - 0.01) * 1e3)
            peak_threads = max(peak_threads, threads())
            peak_rss = max(peak_rss, rss_kib())
        got = await asyncio.gather(*tasks)
        held = sum(1 for lk in locks if lk.locked())
    lags.sort()
    ends.sort()
    return {
        "lang": "python-aio", "mode": "pending", "n": n,
        "threads_before": base_threads, "threads_peak": peak_threads, "threads_after": threads(),
        "rss_before_kib": base_rss, "rss_peak_kib": peak_rss,
        "rss_per_call_kib": (peak_rss - base_rss) / n,
        "start_secs": start_secs,
        "acquired": sum(1 for g in got if g), "held_after": held,
        "end_late_p50_ms": pct(ends, 0.5) * 1e3, "end_late_max_ms": ends[-1] * 1e3,
        "lag_p99_ms": pct(lags, 0.99), "lag_max_ms": lags[-1] if lags else 0.0,
    }


def name(names, run, i):
    if names == "prefixed":
        return f"scale/{run}/k-{i}"
    if names == "flat":
        return f"{run}-k-{i}"
    if names == "random":
        return f"{uuid.uuid4().hex}"
    return f"{run}-{i}/lock"



def held(addr, n, names, hold):
    run = f"py{os.getpid()}"
    with baton.Client(addr) as c:
        base_threads = threads()
        locks = [c.lock(name(names, run, i)) for i in range(n)]
        failed = 0
        started = time.perf_counter()
        for lk in locks:
            try:
                if not lk.acquire(timeout=30):
                    failed += 1
            except baton.Error as e:
                failed += 1
                print(f"acquire failed: {e}", file=sys.stderr)
        acquire_secs = time.perf_counter() - started
        peak_threads, peak_sockets, peak_rss = threads(), sockets(), rss_kib()
        print("HOLDING", flush=True)
        end = time.monotonic() + hold
        while time.monotonic() < end:
            time.sleep(0.2)
            peak_threads = max(peak_threads, threads())
            peak_sockets = max(peak_sockets, sockets())
            peak_rss = max(peak_rss, rss_kib())
        print("RELEASING", flush=True)
        lost = sum(1 for lk in locks if not lk.locked()) - failed
        release_failed = 0
        started = time.perf_counter()
        for lk in locks:
            try:
                lk.release()
            except baton.Error as e:
                release_failed += 1
                print(f"release failed: {e}", file=sys.stderr)
        release_secs = time.perf_counter() - started
    return {
        "lang": "python", "mode": "held", "n": n, "names": names, "hold_secs": hold,
        "threads_before": base_threads, "threads_peak": peak_threads, "threads_after": threads(),
        "sockets_peak": peak_sockets, "rss_peak_kib": peak_rss,
        "acquire_failed": failed, "lost": lost, "release_failed": release_failed,
        "acquire_secs": acquire_secs, "release_secs": release_secs,
    }


def main():
    if len(sys.argv) != 6:
        sys.exit("usage: worker.py ADDR pending N KEY TIMEOUT | ADDR held N NAMES HOLD")
    addr, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "pending":
        result = asyncio.run(pending(addr, n, sys.argv[4], float(sys.argv[5])))
    elif mode == "held":
        result = held(addr, n, sys.argv[4], float(sys.argv[5]))
    else:
        sys.exit(f"unknown mode {mode!r}")
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
