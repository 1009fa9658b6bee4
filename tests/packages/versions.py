#!/usr/bin/env python3
"""One version for every package, set in one place: `[workspace.package] version` in the root
Cargo.toml. The other files that must carry it (a separate cargo workspace cannot inherit it,
and npm reads package.json) are checked against it, and rewritten by `set`.

  versions.py check        fails, naming each file, when a version differs
  versions.py set X.Y.Z    writes X.Y.Z everywhere (root Cargo.toml included)
  versions.py msrv         fails when a crate a user of one of our published crates compiles
                           (its normal and build dependencies in Cargo.lock, transitively)
                           needs a newer Rust than that crate's rust-version
"""

import json
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

# (file, regex whose group 1 is the version): every place a version is written.
PLACES = [
    ("Cargo.toml", r'(?ms)^\[workspace\.package\].*?^version = "([^"]+)"'),
    ("Cargo.toml", r'(?m)^baton = \{[^}]*version = "([^"]+)"'),
    ("Cargo.toml", r'(?m)^baton-devserver = \{[^}]*version = "([^"]+)"'),
    ("bindings/python/Cargo.toml", r'(?ms)^\[package\].*?^version = "([^"]+)"'),
    ("bindings/node/Cargo.toml", r'(?ms)^\[package\].*?^version = "([^"]+)"'),
    ("bindings/node/package.json", r'(?m)^  "version": "([^"]+)"'),
    ("bindings/node/package-lock.json", r'(?s)^\{\s*"name": "consul-baton",\s*"version": "([^"]+)"'),
    ("bindings/node/package-lock.json", r'(?s)"packages": \{\s*"": \{\s*"name": "consul-baton",\s*"version": "([^"]+)"'),
]


def source() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    return re.search(PLACES[0][1], text).group(1)


def check() -> int:
    want = source()
    bad = []
    for rel, pattern in PLACES:
        m = re.search(pattern, (ROOT / rel).read_text())
        if not m:
            bad.append(f"{rel}: no version found (pattern {pattern!r})")
        elif m.group(1) != want:
            bad.append(f"{rel}: {m.group(1)} (the root Cargo.toml says {want})")
    for b in bad:
        print(f"version drift: {b}", file=sys.stderr)
    if bad:
        print(f"run `make set-version V={want}` (or the version you mean)", file=sys.stderr)
        return 1
    print(f"version {want} everywhere ({len(PLACES)} places)")
    return 0


def set_version(new: str) -> int:
    if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.]+)?", new):
        print(f"{new!r} is not a semver version (X.Y.Z)", file=sys.stderr)
        return 2
    for rel, pattern in PLACES:
        path = ROOT / rel
        text = path.read_text()
        m = re.search(pattern, text)
        if not m:
            print(f"{rel}: no version found", file=sys.stderr)
            return 1
        path.write_text(text[: m.start(1)] + new + text[m.end(1):])
    print(f"set {new}; now update Cargo.lock files (cargo update -w) and CHANGELOG.md")
    return check()


def msrv() -> int:
    text = (ROOT / "Cargo.toml").read_text()
    ours = re.search(r'(?m)^rust-version = "([^"]+)"', text).group(1)
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--manifest-path", str(ROOT / "Cargo.toml")],
        check=True, capture_output=True, text=True).stdout)
    key = lambda v: (tuple(int(x) for x in v.split(".")) + (0, 0))[:3]  # noqa: E731
    members = set(meta["workspace_members"])
    by_id = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    bad = []
    checked = set()
    # Each publishable crate against its own rust-version (the workspace's, `ours`, unless it
    # sets a higher one): what a user of it compiles, its normal and build dependencies,
    # transitively (dev-dependencies, e.g. proptest, only build our own tests).
    for root in sorted(i for i in members if by_id[i].get("publish") != []):
        crate = by_id[root]
        declared = crate.get("rust_version")
        if not declared:
            bad.append(f"{crate['name']} declares no rust-version")
            continue
        if key(declared) < key(ours):
            bad.append(f"{crate['name']} declares rust-version {declared}, below the workspace's {ours}")
        todo, seen = [root], {root}
        while todo:
            for dep in nodes[todo.pop()]["deps"]:
                if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]) and dep["pkg"] not in seen:
                    seen.add(dep["pkg"])
                    todo.append(dep["pkg"])
        for i in sorted(seen - {root}):
            p = by_id[i]
            if p.get("rust_version") and key(p["rust_version"]) > key(declared):
                bad.append(f"{crate['name']} (rust-version {declared}) builds {p['name']} {p['version']}, "
                           f"which needs Rust {p['rust_version']}")
        checked.add(f"{crate['name']} {declared}")
    for b in bad:
        print(f"msrv: {b}", file=sys.stderr)
    if bad:
        print("raise that crate's rust-version, or pin the dependency lower (cargo update --precise)", file=sys.stderr)
        return 1
    print(f"rust-version: {', '.join(sorted(checked))}; no dependency they build needs a newer Rust")
    return 0


def main(argv):
    if argv[:1] == ["check"]:
        return check()
    if argv[:1] == ["set"] and len(argv) == 2:
        return set_version(argv[1])
    if argv[:1] == ["msrv"]:
        return msrv()
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
