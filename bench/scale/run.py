#!/usr/bin/env python3
"""`make bench-scale`: what waiting and holding cost as the count grows, in every language,
side by side in one run against one dev server (its default 200-connection limit per client).

  * pending: N acquires of one key that another process holds, all pending at once, each
    with a timeout (Rust `baton::aio` on tokio, Python `baton.aio`, Node): threads of the
    process, RSS per pending acquire, event-loop lag while they wait, how late after its
    timeout each one ended, and that nothing is held after.
  * held: N locks held by one client for HOLD seconds (Rust, C, Python, Node), named
    `prefixed` (scale/<run>/k-i), `flat` (<run>-k-i), `segments` (<run>-i/lock) or `random`
    (a UUID each): threads and sockets of the process, every acquire and release, holdings
    lost meanwhile, and the bytes it read per minute while holding — with --writes W, while
    another process writes W other keys (bench-other/...): what a wider key-hub poll costs.
  * watched: N prefix watches held by one Rust client, named as above: threads and sockets of
    the process, and how soon a write under every 100th prefix is seen by its watch.

After each worker the dev server is asked for the sessions left: only the holder's may remain.

Options: --pending 1000,10000  --held 1000,10000  --watched 1000,10000
         --names prefixed,flat,segments,random
         --langs rust,c,python,node  --timeout 8  --hold 60  --writes 0  --python PATH
(C has no waiting call that leaves its caller's thread free: it runs the held lines only.)
"""

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCK_FLAGS = 0x2DDCCBC058A50C18  # Go api.Lock's flag value (LockFlagValue)


def http(addr, method, path, body=None):
    req = urllib.request.Request(f"http://{addr}{path}", method=method,
                                 data=None if body is None else body.encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        data = r.read()
    return json.loads(data) if data else None


def start_devserver():
    binary = os.path.join(ROOT, "target", "release", "baton-devserver")
    p = subprocess.Popen([binary, "--port", "0", "--exit-on-stdin-eof"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        sys.exit(f"the dev server said {line!r}")
    return p, line.split("=", 1)[1]


def hold_key(addr, key):
    """Holds `key` as another process's lock would (a session without TTL, Go's lock flags)."""
    sid = http(addr, "PUT", "/v1/session/create", json.dumps({"Name": "bench-scale holder"}))["ID"]
    assert http(addr, "PUT", f"/v1/kv/{key}?acquire={sid}&flags={LOCK_FLAGS}", "") is True
    return sid


def sessions_left(addr, keep):
    return [s["ID"] for s in http(addr, "GET", "/v1/session/list") if s["ID"] != keep]


def worker_cmd(lang, python):
    if lang == "rust":
        return [os.path.join(ROOT, "target", "release", "bench-scale")]
    if lang == "c":
        return [os.path.join(ROOT, "target", "bench-scale", "worker-c")]
    if lang == "python":
        return [python, os.path.join(ROOT, "bench", "scale", "worker.py")]
    if lang == "node":
        return ["node", os.path.join(ROOT, "bench", "scale", "worker.js")]
    sys.exit(f"unknown language {lang!r}")


def write_others(addr, count, secs, tag):
    """Another process's writes while the worker holds: `count` keys under bench-other/, at an
    even pace over `secs` seconds, on one keep-alive connection."""
    import http.client
    conn = http.client.HTTPConnection(*addr.split(":"), timeout=30)
    start = time.monotonic()
    for i in range(count):
        wait = start + secs * i / count - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        conn.request("PUT", f"/v1/kv/bench-other/{tag}/{i}", body=b"x" * 64)
        conn.getresponse().read()
    conn.close()


def run_worker(cmd, timeout, addr=None, writes=0, hold=0.0):
    """Runs a worker; with `writes`, another process's writes run while it holds (it prints
    HOLDING when its hold begins)."""
    import threading
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = None
    lines = []
    deadline = time.monotonic() + timeout
    polled = None
    for line in p.stdout:
        lines.append(line)
        if line.strip() == "HOLDING" and addr:
            http(addr, "DELETE", "/_devserver/requests")
            began = time.monotonic()
            if writes:
                writer = threading.Thread(target=write_others, args=(addr, writes, hold * 0.9, p.pid))
                writer.start()
        if line.strip() == "RELEASING" and addr:
            # What the worker's polls read while it held: answer bodies of its GETs.
            counts = http(addr, "GET", "/_devserver/requests")
            got = sum(v for k, v in counts.get("body_bytes_by_route", {}).items() if k.startswith("GET "))
            polled = got / 1024 / max(time.monotonic() - began, 1e-3) * 60
        if time.monotonic() > deadline:
            p.kill()
            break
    err = p.stderr.read()
    p.wait()
    if writer:
        writer.join()
    for line in lines:
        if line.startswith("RESULT "):
            result = json.loads(line[len("RESULT "):])
            result["polled_kib_per_min"] = polled
            return result
    sys.exit(f"{' '.join(cmd)} failed (exit {p.returncode}):\n{''.join(lines)}\n{err[-3000:]}")


def kib(v):
    return f"{v:.1f} KiB"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pending", default="1000,10000")
    ap.add_argument("--held", default="1000,10000")
    ap.add_argument("--watched", default="1000,10000",
                    help="prefix watches one Rust client holds, named as --names says")
    ap.add_argument("--names", default="prefixed,flat,segments,random")
    ap.add_argument("--langs", default="rust,c,python,node")
    ap.add_argument("--timeout", type=float, default=8.0)
    ap.add_argument("--hold", type=float, default=60.0)
    ap.add_argument("--writes", type=int, default=0,
                    help="keys another process writes (bench-other/...) while each held worker holds")
    ap.add_argument("--python", default=sys.executable)
    args = ap.parse_args()
    langs = [x for x in args.langs.split(",") if x]
    dev, addr = start_devserver()
    failures = []
    try:
        print(f"dev server {addr}; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}")
        for n in [int(x) for x in args.pending.split(",") if x]:
            key = f"scale-pending/{n}"
            holder = hold_key(addr, key)
            for lang in [x for x in langs if x != "c"]:
                wlang = "python-aio" if lang == "python" else lang
                r = run_worker(worker_cmd(lang, args.python) + [addr, "pending", str(n), key, str(args.timeout)],
                               timeout=args.timeout * 4 + 120)
                left = sessions_left(addr, holder)
                print(f"pending {n:>6} {wlang:<10} threads {r['threads_before']:>3} -> {r['threads_peak']:>4}"
                      f" (after close {r['threads_after']:>3}); RSS {kib(r['rss_per_call_kib'])} per pending acquire;"
                      f" ended {r['end_late_p50_ms']:.0f}/{r['end_late_max_ms']:.0f} ms after the timeout (p50/max);"
                      f" loop lag p99 {r['lag_p99_ms']:.2f} ms; acquired {r['acquired']}, held after {r['held_after']};"
                      f" sessions left {len(left)}")
                if r["acquired"] or r["held_after"] or left:
                    failures.append(f"pending {n} {wlang}: acquired {r['acquired']}, held {r['held_after']}, sessions {left}")
                for s in left:
                    http(addr, "PUT", f"/v1/session/destroy/{s}")
            http(addr, "PUT", f"/v1/session/destroy/{holder}")
        for n in [int(x) for x in args.held.split(",") if x]:
            for names in [x for x in args.names.split(",") if x]:
                for lang in langs:
                    r = run_worker(worker_cmd(lang, args.python) + [addr, "held", str(n), names, str(args.hold)],
                                   timeout=args.hold + 600, addr=addr, writes=args.writes, hold=args.hold)
                    left = sessions_left(addr, None)
                    print(f"held {n:>6} {names:<9} {r['lang']:<6} threads {r['threads_before']:>3} -> {r['threads_peak']:>3}"
                          f" (after close {r['threads_after']:>3}); sockets {r['sockets_peak']:>3};"
                          f" acquire {r['acquire_secs']:.1f} s, release {r['release_secs']:.1f} s;"
                          f" polls read {r['polled_kib_per_min']:.0f} KiB/min while held;"
                          f" failed acquires {r['acquire_failed']}, lost {r['lost']}, failed releases {r['release_failed']};"
                          f" sessions left {len(left)}")
                    if r["acquire_failed"] or r["lost"] or r["release_failed"] or left:
                        failures.append(f"held {n} {names} {r['lang']}: {r}")
                    for s in left:
                        http(addr, "PUT", f"/v1/session/destroy/{s}")
        for n in [int(x) for x in args.watched.split(",") if x]:
            for names in [x for x in args.names.split(",") if x]:
                r = run_worker(worker_cmd("rust", args.python) + [addr, "watched", str(n), names, "0"],
                               timeout=600)
                print(f"watched {n:>5} {names:<9} rust   threads {r['threads_before']:>3} -> {r['threads_peak']:>3}"
                      f" (after close {r['threads_after']:>3}, two clients); sockets {r['sockets_peak']:>3};"
                      f" first states in {r['watch_secs']:.1f} s; a write seen in {r['seen_p50_ms']:.1f}/{r['seen_max_ms']:.1f} ms"
                      f" (p50/max of {r['changes']}), missed {r['missed']}")
                if r["missed"]:
                    failures.append(f"watched {n} {names}: {r}")
    finally:
        dev.stdin.close()
        dev.wait(timeout=30)
    if failures:
        print("FAILURES:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
