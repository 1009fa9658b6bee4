#!/usr/bin/env python3
"""`make test-pyconsul`: runs py-consul's own test suite, from PyPI's sdist of a pinned release,
against baton-devserver (our conftest.py replaces theirs, which starts Consul in Docker).

Fails when a test listed in expected-pass.txt does not pass; reports tests that pass without
being listed (add them to the list). Usage: run.py [--version X.Y.Z] [pytest args...]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WORK = ROOT / "target" / "pyconsul"


def fetch(version: str) -> Path:
    """Downloads (once) and unpacks the sdist; returns the unpacked tree with our conftest."""
    sdist = WORK / f"py_consul-{version}.tar.gz"
    if not sdist.exists():
        WORK.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
             f"py-consul=={version}", "-d", str(WORK)],
            check=True,
        )
    tree = WORK / f"py_consul-{version}"
    if tree.exists():
        shutil.rmtree(tree)
    with tarfile.open(sdist) as tar:
        try:
            tar.extractall(WORK, filter="data")
        except TypeError:  # Python without extraction filters (before 3.11.4 / 3.10.12)
            tar.extractall(WORK)
    shutil.copy(HERE / "conftest.py", tree / "conftest.py")
    return tree


def read_list(path: Path) -> list[str]:
    out = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def write_list(path: Path, tests: list[str]) -> None:
    """Keeps the leading comment block, replaces the list."""
    header = []
    for line in path.read_text().splitlines() if path.exists() else []:
        if not line.startswith("#"):
            break
        header.append(line)
    path.write_text("\n".join(header + sorted(tests)) + "\n")


def outcomes(xml: Path) -> dict[str, str]:
    """Test id (`tests/api/test_kv.py::TestKV::test_kv`) -> passed / failed / skipped."""
    result = {}
    for case in ET.parse(xml).iter("testcase"):
        cls = case.get("classname", "")
        parts = cls.split(".")
        # classname is "tests.api.test_kv.TestKV" or "tests.test_std"
        mod_end = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        path = "/".join(parts[: mod_end + 1]) + ".py"
        test_id = "::".join([path, *parts[mod_end + 1 :], case.get("name", "")])
        status = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                status = "failed"
            elif child.tag == "skipped":
                status = "skipped"
        result[test_id] = status
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="1.8.0")
    ap.add_argument("--update", action="store_true", help="rewrite expected-pass.txt from this run")
    args, extra = ap.parse_known_args()
    tree = fetch(args.version)
    xml = WORK / "results.xml"
    started = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", "-q", "--tb=no", "-rN", "-p", "no:cacheprovider", "-o", "addopts=",
           f"--junitxml={xml}", "tests", *extra]
    env = dict(os.environ, BATON_ROOT=str(ROOT))
    subprocess.run(cmd, cwd=tree, env=env, check=False)
    took = time.monotonic() - started
    got = outcomes(xml)
    expected = read_list(HERE / "expected-pass.txt")
    passed = sorted(t for t, s in got.items() if s == "passed")
    missing = [t for t in expected if got.get(t) != "passed"]
    new = [t for t in passed if t not in set(expected)]
    print(f"\npy-consul {args.version}: {len(passed)} passed of {len(got)} "
          f"({len(expected)} expected to pass) in {took:.0f} s")
    if args.update:
        write_list(HERE / "expected-pass.txt", passed)
        print(f"expected-pass.txt rewritten: {len(passed)} tests")
        return 0
    if new:
        print(f"{len(new)} passing but not in tests/pyconsul/expected-pass.txt (add them):")
        for t in new:
            print(f"  {t}")
    if missing:
        print(f"{len(missing)} expected to pass but did not:")
        for t in missing:
            print(f"  {t} ({got.get(t, 'not run')})")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
