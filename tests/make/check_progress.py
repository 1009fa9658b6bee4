"""`make demo` says what it is doing (issue 43, item 9): on a cold clone its builds take minutes,
and a step that prints nothing for minutes looks hung. This reads what `make -n demo` would run
(for a venv that does not exist yet, as on a fresh clone) and fails when a long step — a cargo,
maturin or napi build, `npm ci`, a pip install of requirements — runs before any
`echo "== ..."` line has said what is being built, or when a stretch between two announcements
holds more than one kind of long step (an unannounced new step hiding under the last one).

Usage: python3 tests/make/check_progress.py [--self-test]"""

import os
import re
import subprocess
import sys
import tempfile

LONG = re.compile(r"\b(cargo build|maturin build|napi build|npm ci|pip install -q -r|pip install -r)\b")
ANNOUNCE = re.compile(r"""^\s*@?echo\s+["']?== """)
# Steps one announcement covers together (node-build's: `npm ci`, then the addon's build).
COVERS = {"napi build": "npm ci"}


def unannounced(lines):
    """The long steps of `lines` that no announcement covers: any before the first one, and
    in each stretch between announcements, every step of a kind other than the stretch's
    first (one announcement may cover several builds of one kind, `npm ci` then `napi build`
    of one target excepted by listing both under it)."""
    missing, announced, kinds = [], False, set()
    for line in lines:
        text = line.strip()
        if ANNOUNCE.search(text):
            announced, kinds = True, set()
            continue
        if text.startswith("echo ") or ">&2" in text:
            continue  # a message, not a step
        m = LONG.search(text)
        if not m:
            continue
        kind = COVERS.get(m.group(1), m.group(1))
        if not announced or (kinds and kind not in kinds):
            missing.append(text)
        kinds.add(kind)
    return missing


def main() -> int:
    if "--self-test" in sys.argv:
        quiet = ["python3 -m venv .venv", ".venv/bin/pip install -q --no-build-isolation ./bindings/python"]
        planted = ['echo "== one"', "cargo build -p a", "cargo build -p b", "maturin build"]
        ok = (unannounced(planted) == ["maturin build"]
              and unannounced(quiet + ['echo "== x"', "cargo build"]) == []
              and unannounced(["pip install -q -r req.txt", 'echo "== x"']) == ["pip install -q -r req.txt"])
        print(f"progress self-test: {'ok' if ok else 'FAILED'}")
        return 0 if ok else 1
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "fresh-venv")
        out = subprocess.run(["make", "-n", "--no-print-directory", "demo", f"VENV={venv}"],
                             cwd=root, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    steps = [l for l in lines if LONG.search(l)]
    missing = unannounced(lines)
    if not steps:
        print("make -n demo shows no build step: this check reads nothing", file=sys.stderr)
        return 1
    if missing:
        print("make demo runs long steps without saying so first (add an `echo \"== ...\"` line):",
              file=sys.stderr)
        for m in missing:
            print(f"  {m}", file=sys.stderr)
        return 1
    print(f"make demo announces each of its {len(steps)} long steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
