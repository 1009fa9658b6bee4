#!/usr/bin/env python3
"""Runs README.md's Python and JavaScript snippets as written (`make test-readme`).

Each ```python block runs with this interpreter (the venv with the wheel), each
```js block with node (`require('baton')` resolves to bindings/node), against a
fresh baton-devserver whose address is in CONSUL_HTTP_ADDR. A block that defines
`async def main()` without running it gets `asyncio.run(main())` appended. The C
snippet is built and run by examples/c/readme_snippet.sh; the Rust ones are
compiled by `cargo test` (the README is a doctest of the core crate).

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
        # `require('baton')` from a file in tmp finds tmp/node_modules/baton.
        os.makedirs(os.path.join(tmp, "node_modules"))
        os.symlink(os.path.join(ROOT, "bindings", "node"), os.path.join(tmp, "node_modules", "baton"))
        runs = []
        for i, code in enumerate(blocks(readme, "python")):
            if "async def main(" in code and "asyncio.run(main())" not in code:
                code += "\nimport asyncio\nasyncio.run(main())\n"
            runs.append((f"python #{i + 1}", f"snippet{i}.py", code, [sys.executable]))
        for i, code in enumerate(blocks(readme, "js")):
            runs.append((f"js #{i + 1}", f"snippet{i}.js", code, ["node"]))
        try:
            for name, file, code, interp in runs:
                path = os.path.join(tmp, file)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(code)
                try:
                    r = subprocess.run(interp + [path], cwd=tmp, env=env, capture_output=True,
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
