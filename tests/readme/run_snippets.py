#!/usr/bin/env python3
"""Runs README.md's Rust, Python and JavaScript snippets as written (`make test-readme`).

Each ```rust block becomes a binary of a scratch Cargo project that depends on
the core (and the dev server) by path, in edition 2024 as `cargo new` makes it, its body wrapped in `main` (rustdoc's
hidden `# ` lines included, as rustdoc compiles them); each ```python block runs
with this interpreter (the venv with the wheel); each ```js block with node
(`require('consul-baton')` resolves to bindings/node). All run against a fresh
baton-devserver whose address is in CONSUL_HTTP_ADDR. A Python block that defines
`async def main()` without running it gets `asyncio.run(main())` appended. The C
snippet is built and run by examples/c/readme_snippet.sh.

A snippet fails the run if it exits non-zero or takes longer than 60 s.
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def blocks(text, lang):
    return re.findall(rf"^```{lang}\n(.*?)^```$", text, flags=re.S | re.M)


def rust_project(tmp, codes):
    """A scratch crate with one binary per Rust block; returns the binaries' paths."""
    proj = os.path.join(tmp, "rust")
    os.makedirs(os.path.join(proj, "src", "bin"))
    with open(os.path.join(proj, "Cargo.toml"), "w", encoding="utf-8") as f:
        f.write(f"""[package]
name = "readme-snippets"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
consul-baton = {{ path = "{ROOT}/core" }}
consul-baton-devserver = {{ path = "{ROOT}/devserver" }}

[workspace]
""")
    # The workspace's lock file: same versions, so the shared target dir is reused.
    with open(os.path.join(ROOT, "Cargo.lock"), encoding="utf-8") as src, \
            open(os.path.join(proj, "Cargo.lock"), "w", encoding="utf-8") as dst:
        dst.write(src.read())
    names = []
    for i, code in enumerate(codes):
        body = "\n".join(line[2:] if line.startswith("# ") else line
                         for line in code.splitlines())
        name = f"snippet{i + 1}"
        with open(os.path.join(proj, "src", "bin", f"{name}.rs"), "w", encoding="utf-8") as f:
            f.write("#![allow(unused)]\nfn main() {\n    let run = || {\n" + body +
                    "\n    };\n    if let Err(e) = run() {\n        eprintln!(\"{e}\");\n"
                    "        std::process::exit(1);\n    }\n}\n")
        names.append(name)
    target = os.path.join(ROOT, "target")
    subprocess.run(["cargo", "build", "--quiet", "--bins", "--manifest-path",
                    os.path.join(proj, "Cargo.toml")],
                   env=dict(os.environ, CARGO_TARGET_DIR=target), check=True)
    return [os.path.join(target, "debug", n) for n in names]


def start_devserver():
    p = subprocess.Popen(
        [os.path.join(ROOT, "target", "debug", "baton-devserver"), "--port", "0",
         "--session-ttl-min", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        p.kill()
        sys.exit(f"the dev server did not start: {line!r}")
    return p, line.split("=", 1)[1]


def main():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    server, addr = start_devserver()
    env = dict(os.environ, CONSUL_HTTP_ADDR=addr)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # `require('consul-baton')` from a file in tmp finds tmp/node_modules/consul-baton.
        os.makedirs(os.path.join(tmp, "node_modules"))
        os.symlink(os.path.join(ROOT, "bindings", "node"), os.path.join(tmp, "node_modules", "consul-baton"))
        runs = []
        rust = rust_project(tmp, blocks(readme, r"rust(?:,no_run)?(?:,edition2024)?"))
        for i, binary in enumerate(rust):
            runs.append((f"rust #{i + 1}", None, None, [binary]))
        for i, code in enumerate(blocks(readme, "python")):
            if "async def main(" in code and "asyncio.run(main())" not in code:
                code += "\nimport asyncio\nasyncio.run(main())\n"
            runs.append((f"python #{i + 1}", f"snippet{i}.py", code, [sys.executable]))
        for i, code in enumerate(blocks(readme, "js")):
            runs.append((f"js #{i + 1}", f"snippet{i}.js", code, ["node"]))
        try:
            for name, file, code, interp in runs:
                argv = list(interp)
                if file is not None:
                    path = os.path.join(tmp, file)
                    with open(path, "w", encoding="utf-8") as f:
                        f.write(code)
                    argv.append(path)
                try:
                    r = subprocess.run(argv, cwd=tmp, env=env, capture_output=True,
                                       text=True, timeout=60)
                    ok = r.returncode == 0
                    out = (r.stdout + r.stderr).strip()
                except subprocess.TimeoutExpired:
                    ok, out = False, "timed out after 60 s"
                print(f"README {name}: {'ok' if ok else 'FAILED'}" + (f"\n{out}" if out else ""))
                failures += not ok
        finally:
            server.terminate()
            server.wait()
    print(f"README snippets: {len(runs) - failures} ran, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
