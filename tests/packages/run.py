#!/usr/bin/env python3
"""`make test-packages`: builds every artifact a user would install, installs each one into a
fresh place OUTSIDE the repository, and runs a smoke test against the packaged dev server
(a lock, an election, and a loss caused by the dev server's restart fault).

  Rust    cargo publish --dry-run of every publishable crate; the .crate files unpacked; a
          scratch cargo project that `cargo add`s them by path runs tests/packages/rust;
          their docs built as docs.rs does (--cfg docsrs, warnings are errors)
  Python  the abi3 manylinux wheel and the sdist (maturin); a new venv per artifact that
          `pip install`s it, then `baton-devserver --help` and pytest on
          tests/packages/python (the plugin's consul_devserver fixture)
  Node    `npm pack` (addon and dev server bundled); a new npm project that `npm install`s
          the tarball (no warnings allowed) and runs `node --test` on tests/packages/node;
          the loader's error when no addon fits the platform
  C       `make install` into a new prefix and `make dist`; tests/packages/c/smoke.c built
          with pkg-config against the prefix and run against the tarball's baton-devserver;
          the soname; the tarball's relocatable baton.pc. Then docs/src/getting-started/c.md as
          written: its `make install PREFIX=$HOME/...` under a new HOME, its app.c and `cc` line
          (RUNPATH checked), its static build, the installed baton-devserver, ./app with no
          LD_LIBRARY_PATH printing what the page says; the installed sizes under packager-sane
          bounds, and every baton.h function exported by libbaton.so

Also: one version everywhere (versions.py check) and the rust-version check (versions.py
msrv). Build outputs go to target/packages/ (artifacts in target/packages/dist); logs of each
step in target/packages/logs/. Ends with `N passed, N failed`; exit status 1 on any failure.
"""

import argparse
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "packages"
OUT = ROOT / "target" / "packages"
DIST = OUT / "dist"
LOGS = OUT / "logs"
PY_VENV = ROOT / ".venv"  # the project's venv (maturin); `make test-packages` makes it
PYTEST_PIN = "pytest==9.2.0"  # as bindings/python/requirements-dev.txt

results = []  # (name, ok, detail)


def version() -> str:
    text = (ROOT / "Cargo.toml").read_text()
    return re.search(r'(?ms)^\[workspace\.package\].*?^version = "([^"]+)"', text).group(1)


def run(step, cmd, cwd=ROOT, env=None, check=True, timeout=1800, input_text=None):
    """Runs cmd, appending its output to logs/<step>.log; returns (returncode, output)."""
    LOGS.mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    started = time.monotonic()
    p = subprocess.run(cmd, cwd=cwd, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, input=input_text)
    with open(LOGS / f"{step}.log", "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(map(str, cmd))}   (in {cwd}, {time.monotonic() - started:.1f} s, exit {p.returncode})\n")
        log.write(p.stdout + "\n")
    if check and p.returncode != 0:
        tail = "\n".join(p.stdout.splitlines()[-25:])
        raise StepFailed(f"`{' '.join(map(str, cmd))}` exited {p.returncode}:\n{tail}")
    return p.returncode, p.stdout


class StepFailed(Exception):
    pass


def step(name):
    """Decorator: runs the check, records PASS/FAIL (a failure does not stop later checks)."""

    def wrap(fn):
        def go(*args, **kwargs):
            started = time.monotonic()
            try:
                detail = fn(*args, **kwargs) or ""
                results.append((name, True, detail))
                print(f"PASS {name} ({time.monotonic() - started:.0f} s){': ' + detail if detail else ''}", flush=True)
                return True
            except (StepFailed, AssertionError, subprocess.TimeoutExpired, OSError) as e:
                results.append((name, False, str(e)))
                print(f"FAIL {name} ({time.monotonic() - started:.0f} s): {e}", flush=True)
                return False

        return go

    return wrap


# ---- version and rust-version --------------------------------------------------------------

@step("one version everywhere")
def check_versions():
    run("versions", [sys.executable, HERE / "versions.py", "check"])
    return version()


@step("rust-version covers what users of the published crates compile")
def check_msrv():
    run("versions", [sys.executable, HERE / "versions.py", "msrv"])


# ---- Rust ------------------------------------------------------------------------------------

CRATES = ["consul-baton", "consul-baton-devserver", "consul-baton-cli"]


@step("cargo publish --dry-run (every publishable crate)")
def cargo_publish_dry_run():
    # The dry run packages the crates into a scratch registry of its own and builds the later
    # crates against the earlier ones unpacked from it, into cargo's registry cache, where an
    # unpacking is reused whenever name and version match: a machine that ran this before
    # would build against the sources of that time. Only those scratch unpackings go (their
    # registry has no host name; crates.io's folders are left alone).
    cargo_home = pathlib.Path(os.environ.get("CARGO_HOME", pathlib.Path.home() / ".cargo"))
    v = version()
    for registry in (cargo_home / "registry" / "src").glob("*"):
        if registry.name.startswith("index."):
            continue
        for c in CRATES:
            shutil.rmtree(registry / f"{c}-{v}", ignore_errors=True)
    cmd = ["cargo", "publish", "--dry-run", "--allow-dirty", "--locked"]
    for c in CRATES:
        cmd += ["-p", c]
    _, out = run("cargo-publish", cmd)
    warnings = [line for line in out.splitlines()
                if line.startswith("warning:") and "aborting upload due to dry run" not in line]
    assert not warnings, "cargo publish warns:\n" + "\n".join(warnings)
    # The .crate files themselves (a dry run leaves them only in a scratch folder of its own);
    # already verified above, so not built again.
    cmd = ["cargo", "package", "--no-verify", "--allow-dirty", "--locked"]
    for c in CRATES:
        cmd += ["-p", c]
    run("cargo-publish", cmd)
    v = version()
    for c in CRATES:
        crate = ROOT / "target" / "package" / f"{c}-{v}.crate"
        assert crate.exists(), f"no {c}-{v}.crate"
        shutil.copy(crate, DIST / crate.name)
    # Nothing else is publishable: every other member says publish = false.
    meta = json.loads(run("cargo-publish", ["cargo", "metadata", "--format-version", "1", "--no-deps"])[1])
    others = [p["name"] for p in meta["packages"] if p["publish"] != [] and p["name"] not in CRATES]
    assert not others, f"publishable but not checked here (add publish = false or to CRATES): {others}"
    return ", ".join(f"{c}-{v}.crate" for c in CRATES)


def unpack_crates(work: pathlib.Path) -> dict:
    dirs = {}
    for c in ["consul-baton", "consul-baton-devserver"]:
        with tarfile.open(ROOT / "target" / "package" / f"{c}-{version()}.crate") as t:
            t.extractall(work / "crates", filter="data") if sys.version_info >= (3, 12) else t.extractall(work / "crates")
        dirs[c] = work / "crates" / f"{c}-{version()}"
    return dirs


@step("Rust: a scratch project using the packaged crates (lock, election, loss)")
def rust_scratch(work: pathlib.Path):
    crates = unpack_crates(work)
    proj = work / "rust-app"
    run("rust", ["cargo", "new", "--lib", "--vcs", "none", "--name", "baton_package_smoke", proj])
    # The README's install lines, with --path to the unpacked .crate instead of crates.io.
    run("rust", ["cargo", "add", "--offline", "consul-baton", "--path", crates["consul-baton"]], cwd=proj)
    run("rust", ["cargo", "add", "--offline", "--dev", "consul-baton-devserver", "--path",
                 crates["consul-baton-devserver"]], cwd=proj)
    (proj / "tests").mkdir(exist_ok=True)
    shutil.copy(HERE / "rust" / "tests" / "smoke.rs", proj / "tests" / "smoke.rs")
    # The repository's lock file pins the same dependency versions CI tests (cargo trims the
    # rest), and the shared target dir reuses their builds; consul-baton itself is compiled
    # from the unpacked package.
    shutil.copy(ROOT / "Cargo.lock", proj / "Cargo.lock")
    env = {"CARGO_TARGET_DIR": str(ROOT / "target")}
    _, out = run("rust", ["cargo", "test", "--test", "smoke"], cwd=proj, env=env)
    m = re.search(r"test result: ok\. (\d+) passed", out)
    assert m and int(m.group(1)) >= 1, "no test ran"
    # The docs as docs.rs builds them: each from its unpacked .crate alone, with --cfg docsrs,
    # warnings denied (consul-baton's dev-dependency on the unpublished dev server is patched
    # to its unpacked package, as it would be found on crates.io).
    env_doc = dict(env, RUSTDOCFLAGS="--cfg docsrs -D warnings", DOCS_RS="1")
    patch = f'patch.crates-io.consul-baton-devserver.path="{crates["consul-baton-devserver"]}"'
    for name, where in crates.items():
        shutil.copy(ROOT / "Cargo.lock", where / "Cargo.lock")
        run("rust", ["cargo", "doc", "--no-deps", "--config", patch], cwd=where, env=env_doc)
        assert (ROOT / "target" / "doc" / name.replace("consul-", "").replace("-", "_") / "index.html").exists()
    return f"{m.group(1)} test(s) passed; docs of {', '.join(crates)} built"


# ---- C ---------------------------------------------------------------------------------------

def put(addr: str, path: str):
    req = urllib.request.Request(f"http://{addr}{path}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read()


def start_devserver(binary):
    p = subprocess.Popen([str(binary), "--port", "0", "--session-ttl-min", "100ms"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        p.kill()
        p.wait()
        raise StepFailed(f"{binary} did not start: {line!r}")
    return p, line.split("=", 1)[1]


@step("C: make install + make dist; a program built with pkg-config (lock, election, loss)")
def c_package(work: pathlib.Path):
    prefix = work / "c-prefix"
    run("c", ["make", "--no-print-directory", "install", "FFI_PROFILE=release", f"PREFIX={prefix}"])
    _, out = run("c", ["make", "--no-print-directory", "dist"])
    tarball = ROOT / out.strip().splitlines()[-1]
    assert tarball.exists(), f"make dist did not produce {tarball}"
    shutil.copy(tarball, DIST / tarball.name)
    v = version()
    major, minor = v.split(".")[:2]
    soname = f"libbaton.so.{'0.' + minor if major == '0' else major}"
    _, dyn = run("c", ["readelf", "-d", prefix / "lib" / f"libbaton.so.{v}"])
    assert f"[{soname}]" in dyn, f"soname is not {soname}:\n{dyn}"
    assert os.readlink(prefix / "lib" / soname) == f"libbaton.so.{v}"

    app = work / "c-app"
    app.mkdir()
    shutil.copy(HERE / "c" / "smoke.c", app / "smoke.c")
    pc = {"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}
    _, flags = run("c", ["pkg-config", "--cflags", "--libs", "baton"], env=pc)
    run("c", ["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "smoke.c", *flags.split(),
              f"-Wl,-rpath,{prefix / 'lib'}", "-o", "smoke"], cwd=app)
    _, needed = run("c", ["readelf", "-d", app / "smoke"])
    assert f"[{soname}]" in needed, f"smoke does not load {soname}"

    # The tarball: unpacked elsewhere, its baton.pc points at where it lies.
    with tarfile.open(tarball) as t:
        t.extractall(work / "c-dist")
    unpacked = work / "c-dist" / tarball.name[: -len(".tar.gz")]
    for f in ["include/baton.h", f"lib/libbaton.so.{v}", "lib/libbaton.a", "bin/baton-devserver", "README.md", "CHANGELOG.md"]:
        assert (unpacked / f).exists(), f"{tarball.name} lacks {f}"
    _, dflags = run("c", ["pkg-config", "--cflags", "baton"], env={"PKG_CONFIG_PATH": str(unpacked / "lib" / "pkgconfig")})
    include = dflags.split()[0][len("-I"):]
    assert os.path.realpath(include) == os.path.realpath(unpacked / "include"), f"the tarball's baton.pc gives {dflags}"

    server, addr = start_devserver(unpacked / "bin" / "baton-devserver")
    try:
        prog = subprocess.Popen([str(app / "smoke")], cwd=app, env=dict(os.environ, CONSUL_HTTP_ADDR=addr),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = prog.stdout.readline().strip()
        if first != "HELD":
            prog.kill()
            raise StepFailed(f"smoke printed {first!r}: {prog.stderr.read()}")
        put(addr, "/_devserver/restart")
        rest, err = prog.communicate(timeout=60)
        assert prog.returncode == 0 and rest.strip() == "LOST", f"exit {prog.returncode}: {rest!r} {err}"
    finally:
        server.terminate()
        server.wait()
    return f"{soname}, {tarball.name}"


# The getting-started page, run as written: docs/src/getting-started/c.md.
GETTING_STARTED_C = ROOT / "docs" / "src" / "getting-started" / "c.md"
# Packager-sane bounds on what `make install` puts in lib/: stripped, 4.3 MB and 29.6 MB on
# x86_64 (0.1.0), with room to grow. Unstripped they were 31.8 MB and 94.2 MB (release,
# debug = 1), and 5.3 MB and 41.9 MB with CI's settings (debug = 0, strip = "debuginfo": std's
# own debug info stays in the .a), so the .a's bound catches a lost strip there too, and the
# section checks below catch it whatever the sizes. The .a holds Rust's std and the TLS stack
# and cannot be small (a staticlib's symbols are what a program links against).
MAX_SO_BYTES = 8 * 1024 * 1024
MAX_A_BYTES = 36 * 1024 * 1024


def page_steps(text: str) -> dict:
    """The page's app.c (its C block with `main`) and the shell lines a reader types, found by
    what they start with (comments cut off); AssertionError naming the step the page lost."""
    blocks = re.findall(r"^```(\w*)[^\n]*\n(.*?)^```", text, re.S | re.M)
    apps = [code for lang, code in blocks if lang == "c" and re.search(r"\bint\s+main\s*\(", code)]
    lines = [re.sub(r"\s+#\s.*$", "", ln).strip() for lang, code in blocks if lang == "sh"
             for ln in code.splitlines()]
    lines = [ln for ln in lines if ln]

    def one(prefix, why):
        found = [ln for ln in lines if ln.startswith(prefix)]
        assert found, f"{GETTING_STARTED_C.relative_to(ROOT)} has no `{prefix}...` line ({why})"
        return found[0]

    assert len(apps) == 1, f"{GETTING_STARTED_C.relative_to(ROOT)}: want one ```c block with main, found {len(apps)}"
    # What the page says ./app prints: the comment after `./app`, lines split by " / ".
    said = next((ln.split("#", 1)[1].strip() for lang, code in blocks if lang == "sh"
                 for ln in code.splitlines() if ln.strip().startswith("./app") and "#" in ln), None)
    assert said, f"{GETTING_STARTED_C.relative_to(ROOT)}: the `./app` line has no `# <output>` comment"
    return {
        "app.c": apps[0],
        "install": one("make install PREFIX=", "the install"),
        "env": one("export PKG_CONFIG_PATH=", "where pkg-config and the shell find the prefix"),
        "cc": one("cc app.c -o app ", "the build"),
        "static": one("cc app.c -o app-static ", "the static build"),
        "devserver": one("baton-devserver ", "the dev server"),
        "addr": one("export CONSUL_HTTP_ADDR=", "the address the dev server printed"),
        "run": one("./app", "running the program"),
        "output": said,
    }


def shell(cmd, cwd, env, step="c-page"):
    """Runs one of the page's lines with bash, as a reader's shell would."""
    return run(step, ["bash", "-ec", cmd], cwd=cwd, env=env)[1]


@step("C: the getting-started page as written (make install to a new prefix, pkg-config build, ./app with no LD_LIBRARY_PATH)")
def c_getting_started(work: pathlib.Path):
    page = page_steps(GETTING_STARTED_C.read_text(encoding="utf-8"))
    # A new HOME, so the page's `$HOME/...` prefix is a fresh one; cargo and rustup keep theirs.
    home = work / "c-page-home"
    home.mkdir()
    real_home = pathlib.Path.home()
    base = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    base.update(HOME=str(home), CARGO_HOME=os.environ.get("CARGO_HOME", str(real_home / ".cargo")),
                RUSTUP_HOME=os.environ.get("RUSTUP_HOME", str(real_home / ".rustup")))
    base.pop("PKG_CONFIG_PATH", None)
    # run() merges into os.environ; these steps must not see the caller's LD_LIBRARY_PATH.
    saved_ld = os.environ.pop("LD_LIBRARY_PATH", None)
    try:
        return _c_getting_started(page, home, base)
    finally:
        if saved_ld is not None:
            os.environ["LD_LIBRARY_PATH"] = saved_ld


def _c_getting_started(page, home, base):
    shell(page["install"], ROOT, base)
    # The page's exports, applied as its shell would.
    out = shell(page["env"] + "\nenv -0", ROOT, base)
    env = dict(kv.split("=", 1) for kv in out.split("\0") if "=" in kv)
    env.pop("LD_LIBRARY_PATH", None)
    prefixes = [pathlib.Path(p).parent.parent for p in env.get("PKG_CONFIG_PATH", "").split(":") if p]
    assert prefixes and home in prefixes[0].parents, f"the page's prefix is not under HOME: {env.get('PKG_CONFIG_PATH')}"
    prefix = prefixes[0]
    lib = prefix / "lib"
    v = version()

    # Sizes a packager accepts, and the .so still exports the whole C API.
    so, a = lib / f"libbaton.so.{v}", lib / "libbaton.a"
    sizes = f"libbaton.so {so.stat().st_size / 1e6:.1f} MB, libbaton.a {a.stat().st_size / 1e6:.1f} MB"
    assert so.stat().st_size < MAX_SO_BYTES, f"{so} is {so.stat().st_size} bytes (bound {MAX_SO_BYTES}): not stripped?"
    assert a.stat().st_size < MAX_A_BYTES, f"{a} is {a.stat().st_size} bytes (bound {MAX_A_BYTES}): debug info left in?"
    _, dynsyms = run("c-page", ["nm", "-D", "--defined-only", so])
    exported = set(re.findall(r"\sT\s(baton_\w+)$", dynsyms, re.M))
    header = (ROOT / "include" / "baton.h").read_text()
    declared = set(re.findall(r"\b(baton_\w+)\(", "\n".join(ln for ln in header.splitlines() if not ln.lstrip().startswith("//"))))
    assert declared and declared <= exported, f"{so} does not export {sorted(declared - exported)}"
    _, sections = run("c-page", ["readelf", "-S", so])
    assert ".debug_info" not in sections and ".symtab" not in sections, f"{so} keeps debug info or a symtab"
    # Section names of every member of the archive (counted here: the listing is megabytes).
    _, counts = run("c-page", ["bash", "-c", 'readelf -S --wide "$0" | grep -oE "\\.(debug_info|symtab)\\b" | sort | uniq -c', a])
    assert "debug_info" not in counts, f"{a} keeps debug info: {counts.strip()}"
    assert "symtab" in counts, f"{a} lost its symbols"
    devserver = shutil.which("baton-devserver", path=env["PATH"])
    assert devserver and pathlib.Path(devserver) == prefix / "bin" / "baton-devserver", \
        f"baton-devserver on the page's PATH is {devserver}, not the installed one"

    app = home / "app"
    app.mkdir()
    (app / "app.c").write_text(page["app.c"])
    shell(page["cc"], app, env)
    _, dyn = run("c-page", ["readelf", "-d", app / "app"])
    assert re.search(rf"\(RUNPATH\).*\[{re.escape(str(lib))}\]", dyn), f"./app has no RUNPATH {lib}:\n{dyn}"
    shell(page["static"], app, env)
    _, sdyn = run("c-page", ["readelf", "-d", app / "app-static"])
    assert "libbaton" not in sdyn, f"app-static still loads libbaton:\n{sdyn}"

    m = re.fullmatch(r"export CONSUL_HTTP_ADDR=(\S+)", page["addr"])
    assert m, f"the page's address line is {page['addr']!r}"
    want = [ln.strip() for ln in page["output"].split(" / ")]
    # Each program against a dev server of its own started as the page says (a fresh election:
    # the token the page shows).
    for exe in (page["run"], page["run"].replace("./app", "./app-static", 1)):
        server = subprocess.Popen(["bash", "-c", "exec " + page["devserver"]], env=env, cwd=app,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            first = server.stdout.readline().strip()
            assert first.startswith("BATON_DEVSERVER_ADDR="), f"the page's `{page['devserver']}` printed {first!r}"
            # The page's export line, with the address this dev server printed.
            exported = shell(page["addr"].replace(m.group(1), first.split("=", 1)[1]) + "\nenv -0", app, env)
            renv = dict(kv.split("=", 1) for kv in exported.split("\0") if "=" in kv)
            renv.pop("LD_LIBRARY_PATH", None)
            got = [ln.strip() for ln in shell(exe, app, renv).splitlines() if ln.strip()]
            # `<n>` in the page's comment stands for a number (the fencing token).
            ok = len(got) == len(want) and all(
                re.fullmatch(re.escape(w).replace(re.escape("<n>"), r"\d+"), g) for w, g in zip(want, got))
            assert ok, f"`{exe}` printed {got}, the page says {want}"
        finally:
            server.terminate()
            server.wait()
    return f"{prefix.relative_to(home)} under a new HOME; {sizes}; RUNPATH {lib.relative_to(home)}"


# ---- Python ----------------------------------------------------------------------------------

def venv(path: pathlib.Path) -> pathlib.Path:
    run("python", [sys.executable, "-m", "venv", path])
    return path / "bin" / "python"


def py_smoke(py: pathlib.Path, work: pathlib.Path, label: str) -> str:
    """The installed package from a directory outside the repository."""
    where = work / f"py-tests-{label}"
    where.mkdir()
    shutil.copy(HERE / "python" / "test_smoke.py", where / "test_smoke.py")
    shutil.copy(HERE / "python" / "pytest.ini", where / "pytest.ini")
    env = {"PYTHONPATH": "", "PYTHONNOUSERSITE": "1"}
    _, v = run("python", [py, "-c", "import consul_baton; print(consul_baton.__version__)"], cwd=where, env=env)
    assert v.strip() == version(), f"consul_baton.__version__ is {v.strip()!r}"
    _, helptext = run("python", [py.parent / "baton-devserver", "--help"], cwd=where, env=env)
    assert "--session-ttl-min" in helptext, helptext[:400]
    run("python", [py, "-m", "pip", "install", "-q", PYTEST_PIN], cwd=where)
    _, out = run("python", [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_smoke.py"], cwd=where, env=env)
    m = re.search(r"(\d+) passed", out)
    assert m and " failed" not in out, out[-600:]
    return f"{m.group(1)} pytest tests passed"


@step("Python: the abi3 manylinux wheel in a new venv (pytest fixture, lock, election, loss)")
def python_wheel(work: pathlib.Path):
    pydist = OUT / "python"
    shutil.rmtree(pydist, ignore_errors=True)
    maturin = PY_VENV / "bin" / "maturin"
    run("python", [maturin, "build", "--release", "--out", pydist, "--manifest-path",
                   ROOT / "bindings" / "python" / "Cargo.toml"])
    wheels = glob.glob(str(pydist / "*.whl"))
    assert len(wheels) == 1, wheels
    wheel = pathlib.Path(wheels[0])
    assert re.search(r"-cp39-abi3-manylinux_\d+_\d+_x86_64\.whl$|-cp39-abi3-.*manylinux.*\.whl$", wheel.name), \
        f"not an abi3 manylinux wheel: {wheel.name}"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        for f in ["consul_baton/py.typed", "consul_baton/_native.pyi", "consul_baton/pytest_plugin.py",
                  "consul_baton/devserver.py"]:
            assert f in names, f"{wheel.name} lacks {f}"
        assert any(n.endswith("/LICENSE") for n in names), f"{wheel.name} carries no LICENSE"
        ep = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
        eps = {re.sub(r"\s+", "", line) for line in ep.splitlines()}
        assert "baton-devserver=consul_baton.devserver:main" in eps and "[pytest11]" in eps, ep
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        assert "Requires-Python: >=3.9" in meta and "Classifier: Typing :: Typed" in meta, meta[:800]
    shutil.copy(wheel, DIST / wheel.name)
    py = venv(work / "venv-wheel")
    # The README's line `pip install consul-baton`, answered from the built files.
    run("python", [py, "-m", "pip", "install", "-q", "--no-index", "--find-links", pydist, "consul-baton"], cwd=work)
    return f"{wheel.name}; " + py_smoke(py, work, "wheel")


@step("Python: the sdist builds from scratch in a new venv (and passes the same tests)")
def python_sdist(work: pathlib.Path):
    pydist = OUT / "python"
    maturin = PY_VENV / "bin" / "maturin"
    run("python", [maturin, "sdist", "--out", pydist, "--manifest-path", ROOT / "bindings" / "python" / "Cargo.toml"])
    sdists = glob.glob(str(pydist / "*.tar.gz"))
    assert len(sdists) == 1, sdists
    sdist = pathlib.Path(sdists[0])
    shutil.copy(sdist, DIST / sdist.name)
    py = venv(work / "venv-sdist")
    # pip builds it in an isolated environment (maturin from PyPI, crates from crates.io);
    # the shared cargo target dir reuses dependency builds of the same versions.
    run("python", [py, "-m", "pip", "install", "-q", "--no-binary", "consul-baton", sdist], cwd=work,
        env={"CARGO_TARGET_DIR": str(ROOT / "bindings" / "python" / "target")})
    return f"{sdist.name}; " + py_smoke(py, work, "sdist")


# ---- Node ------------------------------------------------------------------------------------

NODE_DIR = ROOT / "bindings" / "node"


@step("Node: npm pack, npm install into a new project (no warnings), node --test (lock, election, loss)")
def node_package(work: pathlib.Path):
    plat = f"{sys.platform}-x64" if os.uname().machine == "x86_64" else None
    assert plat == "linux-x64", "the npm package is built for linux-x64 only"
    run("node", ["make", "--no-print-directory", "npm-pack"])
    tgz = DIST / f"consul-baton-{version()}.tgz"
    with tarfile.open(tgz) as t:
        files = {n[len("package/"):] for n in t.getnames()}
    lib = [f"lib/{p.name}" for p in sorted((NODE_DIR / "lib").glob("*.js"))]  # index.js's modules
    for f in ["package.json", "index.js", "spin.js", "native.js", "devserver.js", "index.d.ts", "devserver.d.ts", "LICENSE",
              "README.md", "consul-baton.linux-x64-gnu.node", "bin/baton-devserver-linux-x64", "bin/baton-devserver.js", *lib]:
        assert f in files, f"the tarball lacks {f}"
    stray = [f for f in files if f.startswith(("src/", "__test__/", "node_modules/", "target/"))]
    assert not stray, f"the tarball carries {stray}"

    app = work / "node-app"
    app.mkdir()
    run("node", ["npm", "init", "-y"], cwd=app)
    # The README's install line for a release file (`npm install consul-baton` from the registry).
    _, out = run("node", ["npm", "install", "--no-audit", "--no-fund", tgz], cwd=app)
    noise = [line for line in out.splitlines() if "warn" in line.lower()]
    assert not noise, "npm install warned:\n" + "\n".join(noise)
    _, helptext = run("node", ["npx", "--no-install", "baton-devserver", "--help"], cwd=app)
    assert "--session-ttl-min" in helptext, helptext[:400]
    shutil.copy(HERE / "node" / "smoke.test.js", app / "smoke.test.js")
    _, out = run("node", ["node", "--test", "smoke.test.js"], cwd=app)
    m = re.search(r"# pass (\d+)", out)
    assert m and re.search(r"# fail 0", out), out[-600:]

    # No addon for the platform: the loader's own error, naming the platform and the way out.
    addon = app / "node_modules" / "consul-baton" / "consul-baton.linux-x64-gnu.node"
    hidden = addon.with_suffix(".hidden")
    addon.rename(hidden)
    try:
        rc, err = run("node", ["node", "-e", "require('consul-baton')"], cwd=app, check=False)
    finally:
        hidden.rename(addon)
    assert rc != 0 and "no native addon for linux-x64-gnu" in err and "npm pack" in err, err[-800:]
    return f"{tgz.name}; {m.group(1)} node tests passed"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="comma-separated subset: versions,rust,c,python,node")
    args = ap.parse_args()
    only = set(args.only.split(",")) if args.only else {"versions", "rust", "c", "python", "node"}
    shutil.rmtree(LOGS, ignore_errors=True)
    shutil.rmtree(DIST, ignore_errors=True)
    DIST.mkdir(parents=True)
    # Installs happen outside the repository, in a fresh temporary directory.
    work = pathlib.Path(tempfile.mkdtemp(prefix="baton-packages-"))
    assert ROOT not in work.parents
    try:
        if "versions" in only:
            check_versions()
            check_msrv()
        if "rust" in only:
            if cargo_publish_dry_run():
                rust_scratch(work)
        if "c" in only:
            c_package(work)
            c_getting_started(work)
        if "python" in only:
            python_wheel(work)
            python_sdist(work)
        if "node" in only:
            node_package(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    passed = sum(1 for _, ok, _ in results if ok)
    failed = len(results) - passed
    print(f"artifacts in {DIST.relative_to(ROOT)}: {', '.join(sorted(os.listdir(DIST)))}")
    if failed:
        print(f"logs in {LOGS.relative_to(ROOT)}/")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
