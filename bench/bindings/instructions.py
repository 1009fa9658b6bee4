#!/usr/bin/env python3
"""`make bench-instructions`: user-space instructions per lock cycle of each client, counted
instead of timed.

Each worker of `make bench-bindings` (bench/bindings/worker.*) runs its uncontended
acquire+release cycles under valgrind's callgrind, twice: with N1 and with N2 measured cycles,
against one dev server over plain HTTP. The difference of the two totals (every thread of the
worker's process, as callgrind reports them at exit) over N2 - N1 is what one more cycle costs:
start-up, imports and warm-up cancel out. The default counts (1,500 and 3,000) come after
Node's JIT has finished compiling the lock path (it goes on until about the 2,100th cycle,
warm-up included: at 500 and 1,500 Node counted 219k instructions a cycle, at 1,500 and 3,000
135k-142k in two runs). Instruction counts do not move with the load of a shared machine the
way times do, so a change of a few percent in a binding's own work shows here when
`make bench-bindings` cannot tell it from noise (Node's counts still move by some 7k between
runs: its JIT and garbage collector); they do not show a wake-up's cost, which is the kernel's
and the hypervisor's.

One line per client: `rust`, `c`, `python`, `python-aio`, `node`, and the floors (`floor`: two
raw PUTs from Rust; `floor-asyncio`, `floor-node`: the same from an event loop, no baton).
Needs valgrind, and what `make bench-instructions` builds (the C worker, `c`, is built by
`make bench-bindings`).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import run as bench

# The clients counted by default: the loops against Rust, and their floors.
LANGS = ("rust", "python-aio", "node", "floor", "floor-asyncio", "floor-node")


def instructions(argv, env, tmp):
    """Runs `argv` under callgrind: the instructions of every thread of the process, summed."""
    out = os.path.join(tmp, "callgrind.out.%p")
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + argv,
                       cwd=bench.ROOT, capture_output=True, text=True, timeout=1800, env=env)
    totals = [int(m.group(1).replace(",", ""))
              for m in re.finditer(r"Collected : ([\d,]+)", p.stderr)]
    if p.returncode != 0 or not totals or "RESULT " not in p.stdout:
        sys.exit(f"bench-instructions: {' '.join(argv)} failed under callgrind (exit "
                 f"{p.returncode}):\n{p.stdout}{p.stderr[-4000:]}")
    for name in os.listdir(tmp):
        if name.startswith("callgrind.out."):
            os.remove(os.path.join(tmp, name))
    return sum(totals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devserver",
                    default=os.path.join(bench.ROOT, "target", "release", "baton-devserver"))
    ap.add_argument("--python", default=os.path.join(bench.ROOT, ".venv", "bin", "python"))
    ap.add_argument("--out", default=os.path.join(bench.ROOT, "target", "bench-bindings"),
                    help="where the C worker was built")
    ap.add_argument("--langs", default=",".join(LANGS))
    ap.add_argument("--cycles", default="1500,3000",
                    help="the two counts of measured cycles, N1,N2 (N2 > N1)")
    args = ap.parse_args()
    langs = [l for l in args.langs.split(",") if l]
    for lang in langs:
        if lang not in bench.LANGS:
            sys.exit(f"unknown language {lang!r} (known: {', '.join(bench.LANGS)})")
    try:
        n1, n2 = (int(x) for x in args.cycles.split(","))
    except ValueError:
        sys.exit(f"--cycles {args.cycles!r}: two counts, N1,N2")
    if not 0 <= n1 < n2:
        sys.exit(f"--cycles {args.cycles!r}: N2 must be greater than N1, both at least 0")
    if "c" in langs and not os.path.exists(os.path.join(args.out, "worker-c")):
        sys.exit(f"bench-instructions: no C worker in {args.out} (`make bench-bindings` builds it)")
    if shutil.which("valgrind") is None:
        sys.exit("bench-instructions: needs valgrind (apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="bench-instructions-") as tmp:
        dev = bench.DevServer(args, ("http",), tmp)
        try:
            print(f"bench-instructions: {bench.machine()}; dev server at {dev.http}; "
                  f"{n1} and {n2} measured cycles per client")
            per_cycle = {}
            for lang in langs:
                env = bench.worker_env("http", None)
                env["BENCH_WARM"] = str(bench.warm_of(lang))
                argv, mode = bench.worker_argv(lang, "cycles", args.out, args.python)
                counts = [instructions(argv + [dev.http, mode, str(n), f"bench/instr/{lang}/{n}"],
                                       env, tmp) for n in (n1, n2)]
                per_cycle[lang] = (counts[1] - counts[0]) / (n2 - n1)
                against = (f"   {per_cycle[lang] / per_cycle['rust']:.2f}x rust"
                           if "rust" in per_cycle and lang != "rust" else "")
                print(f"  {lang:<14} {per_cycle[lang] / 1000:8.1f}k instructions per cycle{against}",
                      flush=True)
        finally:
            dev.close()


if __name__ == "__main__":
    main()
