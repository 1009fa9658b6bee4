#!/usr/bin/env python3
"""Runs every code snippet of README.md, the book (docs/src) and the package pages as written
(`make test-readme`).

Which blocks run, by the fence's language:

* ```rust (any of `rust`, `rust,no_run`, `rust,edition2024`, ...): a module each of one binary
  of a scratch Cargo project that depends on the core and the dev server by path (and tokio, for
  the async snippets), in edition 2024 as `cargo new` makes it, its body wrapped in a function
  the binary's first argument picks (rustdoc's hidden `# ` lines included, as rustdoc compiles
  them);
* ```python: run with this interpreter (the venv with the wheel); a block that defines
  `def test_...` runs under pytest (the wheel's pytest plugin gives it `consul_devserver`); a
  block that defines `async def main()` without running it gets `asyncio.run(main())` appended;
* ```js: run with node (`require('consul-baton')` resolves to bindings/node); a block that uses
  `node:test` reports through its exit status like any other;
* ```c: built with `cc -std=c11 -Wall -Wextra -Werror` against include/baton.h and the debug
  libbaton (target/debug/baton-lib), then run; a block without `main` is wrapped in one (its
  `#include` lines stay on top);
* ```bash: run by `bash -e` with target/debug (the `baton` and `baton-devserver` commands) first
  on PATH.

```sh, ```text and other blocks are shown, not run: commands such as `make demo`, outputs, and
fragments of files. Each block that runs gets a fresh baton-devserver (session_ttl_min 1 s) whose
address is in CONSUL_HTTP_ADDR, and runs in a scratch directory. A snippet fails the run if it
exits non-zero or takes longer than 90 s. The last line is `N passed, N failed`.

A snippet whose output matters says what it must print: one or more lines

    <!-- expect: REGEX -->

right above its fence (blank lines between are allowed; the comment is hidden when the page is
rendered). Each REGEX must match somewhere in the snippet's stdout (Python's `re.search`, `^` and
`$` at line ends), or the snippet fails, its output shown. A block that prints what readers are
meant to see (a token, `held=true`) should carry one: a run that only checks the exit status let
`holding: True token None` pass.

Figures a page states that a file decides (FACTS: the number of py-consul tests that must pass,
which tests/pyconsul/expected-pass.txt lists) are checked too: each paragraph naming the file
must state the file's count ("N tests") and no other count.

`--list` prints the blocks that would run; `--only SUBSTRING` runs the blocks of the files whose
path contains it; `--self-test` runs a planted failing snippet of each language and fails unless
each of them fails.
"""

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE_PAGES = ["core/README.md", "bindings/python/README.md", "bindings/node/README.md",
                 "devserver/README.md", "cli/README.md", "ffi/README.md"]
FENCE = re.compile(r"^```([\w,+-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
EXPECT = re.compile(r"^[ \t]*<!--[ \t]*expect:[ \t]?(.*?)[ \t]*-->[ \t]*$")
TIMEOUT = 90


def doc_files():
    # The API pages docs/tools/apigen.py generates (docs/src/reference/api-*.md) hold
    # signatures, not snippets.
    files = ["README.md"] + sorted(
        os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "src", "**", "*.md"), recursive=True)
        if not re.match(r"api-.+\.md$", os.path.basename(p)))
    return files + [p for p in PACKAGE_PAGES if os.path.exists(os.path.join(ROOT, p))]


def language(info):
    first = info.split(",")[0].lower()
    return {"rust": "rust", "python": "python", "js": "js", "javascript": "js", "c": "c",
            "bash": "bash"}.get(first)


def expectations(text, fence_start):
    """The `<!-- expect: REGEX -->` lines right above the fence that starts at `fence_start`
    (blank lines between allowed), top to bottom."""
    found = []
    for line in reversed(text[:fence_start].splitlines()):
        if not line.strip():
            continue
        m = EXPECT.match(line)
        if not m:
            break
        found.append(m.group(1))
    return found[::-1]


def snippets(files):
    """(file, line, language, code, expected regexes) of every block that runs."""
    out = []
    for rel in files:
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        for m in FENCE.finditer(text):
            lang = language(m.group(1))
            expects = expectations(text, m.start())
            line = text.count("\n", 0, m.start()) + 1
            if lang:
                out.append((rel, line, lang, m.group(2), expects))
            elif expects:
                sys.exit(f"{rel}:{line}: an expect: marker on a block that does not run ({m.group(1)!r})")
    return out


def unmatched(expects, stdout):
    """The regexes of `expects` that do not match `stdout`."""
    return [e for e in expects if not re.search(e, stdout, re.M)]


def listed_tests(rel):
    """How many entries a test list holds (one a line; `#` comments and blank lines skipped)."""
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return sum(1 for line in f if line.split("#", 1)[0].strip())


# Figures the pages state that a file of the repository decides: (page, the file the paragraph
# names, the figure). Each paragraph of the page that names the file must state the figure and
# no other count of tests, so the page cannot go stale silently.
FACTS = [
    ("docs/src/guide/testing.md", "tests/pyconsul/expected-pass.txt",
     lambda: listed_tests("tests/pyconsul/expected-pass.txt")),
]


def count_problems(text, names, figure):
    """What is wrong with the counts the paragraphs of `text` that mention `names` state."""
    problems = []
    paragraphs = [p for p in re.split(r"\n[ \t]*\n", text) if names in p]
    if not paragraphs:
        return [f"no paragraph names {names}"]
    for para in paragraphs:
        # A count: a number followed by "tests" or "of" ("148 of its 168 tests").
        counts = {int(n) for n in re.findall(r"(?<![\w.])(\d+)\s+(?:tests?|of)\b", para)}
        if counts != {figure}:
            problems.append(f"the paragraph naming {names} states {sorted(counts)}, "
                            f"not {figure} (the file's count)")
    return problems


def check_facts():
    """Problems with the FACTS the pages state."""
    problems = []
    for page, names, truth in FACTS:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            problems += [f"{page}: {p}" for p in count_problems(f.read(), names, truth())]
    return problems


def rust_binaries(tmp, rust):
    """Builds the Rust blocks into one binary of a scratch crate, each block a module its first
    argument names (one link instead of one per block: each would carry the whole library);
    returns the argv that runs each block."""
    proj = os.path.join(tmp, "rust")
    os.makedirs(os.path.join(proj, "src", "bin"))
    with open(os.path.join(proj, "Cargo.toml"), "w", encoding="utf-8") as f:
        f.write(f"""[package]
name = "doc-snippets"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
# The `prometheus` feature for the book's metrics page.
consul-baton = {{ path = "{ROOT}/core", features = ["prometheus"] }}
consul-baton-devserver = {{ path = "{ROOT}/devserver" }}
prometheus-client = "0.26"
# For the async snippets (baton::aio on tokio): the features the core's tests use.
tokio = {{ version = "1", features = ["rt", "rt-multi-thread", "macros", "time", "sync"] }}

[workspace]
""")
    # The workspace's lock file: same versions, so the shared target dir is reused.
    shutil.copy(os.path.join(ROOT, "Cargo.lock"), os.path.join(proj, "Cargo.lock"))
    names = []
    modules = []
    for i, code in enumerate(rust):
        body = "\n".join(line[2:] if line.startswith("# ") else ("" if line == "#" else line)
                         for line in code.splitlines())
        name = f"snippet{i + 1}"
        modules.append(f"mod {name} {{\n    pub fn main() {{\n        let run = || {{\n" + body +
                       "\n        };\n        if let Err(e) = run() {\n            eprintln!(\"{e}\");\n"
                       "            std::process::exit(1);\n        }\n    }\n}\n")
        names.append(name)
    dispatch = "".join(f"        Some(\"{n}\") => {n}::main(),\n" for n in names)
    with open(os.path.join(proj, "src", "bin", "snippets.rs"), "w", encoding="utf-8") as f:
        f.write("#![allow(unused)]\n" + "".join(modules) +
                "fn main() {\n    match std::env::args().nth(1).as_deref() {\n" + dispatch +
                "        other => panic!(\"no snippet {other:?}\"),\n    }\n}\n")
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target")
    if rust:
        subprocess.run(["cargo", "build", "--quiet", "--bins", "--manifest-path",
                        os.path.join(proj, "Cargo.toml")],
                       env=dict(os.environ, CARGO_TARGET_DIR=target), check=True)
    return [[os.path.join(target, "debug", "snippets"), n] for n in names]


def c_program(code):
    if re.search(r"\bint\s+main\s*\(", code):
        return code
    lines = code.splitlines()
    includes = [ln for ln in lines if ln.startswith("#include")]
    body = [ln for ln in lines if not ln.startswith("#include")]
    return "\n".join(["#include <stdint.h>", *includes, "int main(void) {", *body, "return 0;", "}"]) + "\n"


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


def prepare(tmp, blocks):
    """(name, argv, cwd) of each block, built where needed."""
    runs = []
    rust = [b for b in blocks if b[2] == "rust"]
    binaries = dict(zip([id(b) for b in rust], rust_binaries(tmp, [b[3] for b in rust])))
    libdir = os.path.join(ROOT, "target", "debug", "baton-lib")
    for n, block in enumerate(blocks):
        rel, line, lang, code, _expects = block
        name = f"{rel}:{line} ({lang})"
        cwd = os.path.join(tmp, f"run{n}")
        os.makedirs(cwd)
        # `require('consul-baton')` from the scratch directory finds node_modules/consul-baton.
        os.makedirs(os.path.join(cwd, "node_modules"))
        os.symlink(os.path.join(ROOT, "bindings", "node"), os.path.join(cwd, "node_modules", "consul-baton"))
        path = os.path.join(cwd, {"python": "test_snippet.py", "js": "snippet.js", "c": "snippet.c",
                                  "bash": "snippet.sh", "rust": "snippet.rs"}[lang])
        with open(path, "w", encoding="utf-8") as f:
            f.write(c_program(code) if lang == "c" else code)
        if lang == "rust":
            argv = list(binaries[id(block)])
        elif lang == "python":
            if re.search(r"^\s*def test_", code, re.M):
                argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path]
            else:
                if "async def main(" in code and "asyncio.run(main())" not in code:
                    with open(path, "a", encoding="utf-8") as f:
                        f.write("\nimport asyncio\nasyncio.run(main())\n")
                argv = [sys.executable, path]
        elif lang == "js":
            argv = ["node", path]
        elif lang == "bash":
            argv = ["bash", "-e", path]
        else:
            exe = os.path.join(cwd, "snippet")
            r = subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", os.path.join(ROOT, "include"),
                                path, "-L", libdir, "-lbaton", "-pthread", f"-Wl,-rpath,{libdir}", "-o", exe],
                               capture_output=True, text=True)
            if r.returncode != 0:
                argv = ["sh", "-c", 'printf "%s" "$0" >&2; exit 1', "cc failed:\n" + r.stdout + r.stderr]
            else:
                argv = [exe]
        runs.append((name, argv, cwd))
    return runs


def run_all(blocks, verbose=True):
    failures = 0
    env0 = dict(os.environ, PATH=os.path.join(ROOT, "target", "debug") + os.pathsep + os.environ["PATH"])
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for (name, argv, cwd), block in zip(prepare(tmp, blocks), blocks):
            server, addr = start_devserver()
            try:
                r = subprocess.run(argv, cwd=cwd, env=dict(env0, CONSUL_HTTP_ADDR=addr),
                                   capture_output=True, text=True, timeout=TIMEOUT)
                ok, out = r.returncode == 0, (r.stdout + r.stderr).strip()
                missing = unmatched(block[4], r.stdout)
                if ok and missing:
                    ok = False
                    out = ("stdout does not match " + ", ".join(f"expect: {e}" for e in missing) +
                           f"\n--- stdout ---\n{r.stdout}--- stderr ---\n{r.stderr}").strip()
            except subprocess.TimeoutExpired:
                ok, out = False, f"timed out after {TIMEOUT} s"
            finally:
                server.terminate()
                server.wait()
            if verbose:
                print(f"{name}: {'ok' if ok else 'FAILED'}" + ("" if ok or not out else f"\n{out}"), flush=True)
            results.append(ok)
            failures += not ok
    return results, failures


SELF_TEST = [
    ("rust", 'let c = baton::Client::from_env()?;\nassert!(c.lock("x")?.is_held(), "planted");\n# Ok::<(), baton::Error>(())\n'),
    ("python", "import consul_baton as baton\nbaton.Client().lock('x').release()\n"),
    ("python", "def test_planted(consul_devserver):\n    assert consul_devserver.addr == ''\n"),
    # as the book's snippets are written: `main()` not awaited, so the rejection is unhandled
    ("js", "const { Client } = require('consul-baton')\nasync function main() {\n  const c = new Client()\n"
           "  if (!(await c.lock('x').release())) throw new Error('planted: released what it did not hold')\n}\nmain()\n"),
    ("c", '#include <baton.h>\nbaton_client *c = NULL;\nif (baton_client_new_from_env(&c) == BATON_OK) return 3;\n'),
    ("c", "int x = undeclared_planted;\n"),
    ("bash", "baton holders --no-such-flag-planted x\n"),
    # Runs and exits 0, but does not print what its page promises (the getting-started snippet
    # that printed `holding: True token None`).
    ("python", "import consul_baton as baton\n"
               "with baton.Client() as client:\n"
               "    with client.lock('jobs/nightly-report') as held:\n"
               "        print('holding:', held, 'token', client.lock('jobs/nightly-report').sequencer)\n",
     [r"^holding: True token \d+$"]),
    # consul lock's -shell joins the words and the shell parses them again: `sh -c 'echo ...'`
    # as separate words runs `echo` with no arguments.
    ("bash", "baton lock planted -- sh -c 'echo \"held=$CONSUL_LOCK_HELD\"'\n", [r"^held=true$"]),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="run the blocks of files whose path contains this")
    ap.add_argument("--list", action="store_true", help="list the blocks that would run")
    ap.add_argument("--self-test", action="store_true", help="planted failing snippets must fail")
    args = ap.parse_args()
    if args.self_test:
        blocks = [("self-test", i + 1, t[0], t[1], t[2] if len(t) > 2 else [])
                  for i, t in enumerate(SELF_TEST)]
        results, _failures = run_all(blocks, verbose=False)
        for (_f, i, lang, _c, _e), ok in zip(blocks, results):
            print(f"self-test #{i} ({lang}): {'FAILED as planted' if not ok else 'PASSED (the runner cannot catch it)'}")
        # The stale figure the testing page carried must be caught.
        stale = ("`make test-pyconsul` runs py-consul 1.8.0's own test suite, and 148\n"
                 "of its 168 tests pass; the list is `tests/pyconsul/expected-pass.txt`.")
        caught = bool(count_problems(stale, "tests/pyconsul/expected-pass.txt", 156))
        print(f"self-test: a stale count beside expected-pass.txt: "
              f"{'caught' if caught else 'MISSED'}")
        results.append(not caught)
        bad = sum(results)
        print(f"snippet self-test: {len(results) - bad} planted failures caught, {bad} missed")
        return 1 if bad else 0
    files = doc_files()
    if args.only:
        files = [f for f in files if args.only in f]
    blocks = snippets(files)
    if args.list:
        for rel, line, lang, _code, expects in blocks:
            print(f"{rel}:{line} {lang}" + "".join(f"  expect: {e}" for e in expects))
        return 0
    facts = check_facts()
    for p in facts:
        print(f"stale figure: {p}")
    _results, failures = run_all(blocks)
    failures += len(facts)
    print(f"doc snippets from {len(files)} files")
    print(f"snippets: {len(blocks) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
