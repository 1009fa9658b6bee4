#!/usr/bin/env python3
"""Checks the book's "Capabilities by language" page against the code.

The page (docs/src/reference/capabilities.md) holds two tables with the same rows and columns:
the APIs, between `<!-- parity:begin -->` and `<!-- parity:end -->`, and the tests that cover
them, between `<!-- parity-tests:begin -->` and `<!-- parity-tests:end -->`, so a reader sees
the API cells without test paths. A cell of either table names things in code spans:

* a test is `path::name`, the path relative to the repository root: a Rust `#[test] fn`, a
  C `static void test_...` function that is also called, a Python `def` / `async def test_...`,
  or the title of a Node `test('...')` / `it('...')`;
* anything else in a code span is an API, resolved per column: Rust by compiling a generated
  crate that names each path against the built `baton` rlib (`Type::method`, a type, or
  `Type.field`); C by compiling a generated file that takes each function's address (or a
  macro's value, or `struct.field`'s offset) against include/baton.h; Python and Python
  asyncio by importing the installed `baton` and resolving the attribute path (`Name(kw=)`
  also checks that the callable takes the keyword `kw`); Node by requiring the built addon
  (bindings/node) and finding the export, its prototype member or static, or, for a name the
  addon does not export at run time (an options interface), the field in the typings.

An API cell without an API says why after `— n/a:` (its tests cell then holds `—`); `— missing`
marks an API the language lacks (a failure). A blank cell is a failure, and so is a row that is
not in both tables, in the same order. Every failure is printed with its row and column; the
last line is `N cells checked, N failed`. Exit status 1 when anything failed.

`--self-test` runs the check on a copy of the page with known faults (an API and a test
renamed in every column, a cell marked missing, a cell blanked) and fails unless exactly
those are reported.

`--convert FILE` prints the two tables made from the one combined table of FILE (the format
README.md had before the book: each cell `APIs; tests ...` between the parity markers), for
merging rows written in that format.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BEGIN = "<!-- parity:begin -->"
END = "<!-- parity:end -->"
TESTS_BEGIN = "<!-- parity-tests:begin -->"
TESTS_END = "<!-- parity-tests:end -->"
PAGE = ROOT / "docs" / "src" / "reference" / "capabilities.md"
COLUMNS = ["Rust", "Rust async", "C", "Python", "Python asyncio", "Node"]
TEST_RE = re.compile(r"^(?P<path>[\w./-]+\.(?:rs|c|py|js|mjs))::(?P<name>.+)$", re.S)
NA_RE = re.compile(r"—\s*n/a:\s*\S")
MISSING_RE = re.compile(r"—\s*missing\b")


@dataclasses.dataclass
class Cell:
    row: str
    column: str
    text: str
    apis: list
    tests: list
    marker: str  # "", "n/a" or "missing"
    tests_text: str = ""  # the cell of the tests table


@dataclasses.dataclass(frozen=True)
class Failure:
    row: str
    column: str
    what: str  # "api", "test", "missing", "blank", "format"
    name: str
    detail: str

    def __str__(self) -> str:
        return f"FAIL [{self.row}] / {self.column}: {self.what} {self.name!r}: {self.detail}"


# ---- the table -------------------------------------------------------------------------------


def code_spans(text: str) -> list:
    """(start, end, content) of each CommonMark code span: a run of N backticks up to the next
    run of exactly N; one space on each side is stripped when both are there."""
    spans = []
    i = 0
    while i < len(text):
        if text[i] != "`":
            i += 1
            continue
        j = i
        while j < len(text) and text[j] == "`":
            j += 1
        ticks = text[i:j]
        k = j
        while True:
            k = text.find(ticks, k)
            if k < 0:
                return spans  # an unclosed run: the rest is text
            after = k + len(ticks)
            if (k > 0 and text[k - 1] == "`") or (after < len(text) and text[after] == "`"):
                k = after
                while k < len(text) and text[k] == "`":
                    k += 1
                continue
            content = text[j:k]
            if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
                content = content[1:-1]
            spans.append((i, after, content))
            i = after
            break
    return spans


def split_row(line: str) -> list:
    """The cells of a table row; `|` inside code spans does not split."""
    line = line.strip()
    if line.startswith("|"):
        line = line[1:]
    if line.endswith("|") and not line.endswith("\\|"):
        line = line[:-1]
    protected = [(s, e) for s, e, _ in code_spans(line)]
    cells, start = [], 0
    for i, ch in enumerate(line):
        if ch == "|" and (i == 0 or line[i - 1] != "\\") and not any(s <= i < e for s, e in protected):
            cells.append(line[start:i])
            start = i + 1
    cells.append(line[start:])
    return [c.strip() for c in cells]


def table_rows(page: str, begin: str, end: str, what: str) -> tuple:
    """(rows, failures): rows are (row name, [cell texts]) of the table between the markers."""
    if page.count(begin) != 1 or page.count(end) != 1:
        return [], [Failure("-", "-", "format", begin, f"need exactly one {begin} and one {end}")]
    body = page.split(begin, 1)[1].split(end, 1)[0]
    lines = [ln for ln in body.splitlines() if ln.strip().startswith("|")]
    if len(lines) < 3:
        return [], [Failure("-", "-", "format", what, "no table rows between the markers")]
    header = split_row(lines[0])
    if header != ["Capability"] + COLUMNS:
        return [], [Failure("-", "-", "format", f"{what} header",
                            f"columns must be Capability | {' | '.join(COLUMNS)}; got {header}")]
    rows, failures = [], []
    for line in lines[2:]:
        parts = split_row(line)
        row = re.sub(r"[*_`]", "", parts[0]).strip() or "?"
        if len(parts) != len(header):
            failures.append(Failure(row, "-", "format", f"{what} row", f"{len(parts)} cells, expected {len(header)}"))
            continue
        rows.append((row, parts[1:]))
    return rows, failures


def parse_table(page: str) -> tuple:
    """(cells, failures) of the two tables (APIs, tests) of the page."""
    api_rows, failures = table_rows(page, BEGIN, END, "API table")
    test_rows, test_failures = table_rows(page, TESTS_BEGIN, TESTS_END, "tests table")
    failures += test_failures
    if failures and not (api_rows and test_rows):
        return [], failures
    tests_by_row = dict(test_rows)
    api_names = [r for r, _ in api_rows]
    for row, _ in test_rows:
        if row not in api_names:
            failures.append(Failure(row, "-", "format", "tests row", "a row of the tests table that the API table lacks"))
    if [r for r, _ in test_rows if r in api_names] != [r for r in api_names if r in tests_by_row]:
        failures.append(Failure("-", "-", "format", "row order", "the two tables list their rows in different orders"))
    cells = []
    for row, parts in api_rows:
        if row not in tests_by_row:
            failures.append(Failure(row, "-", "format", "tests row", "no row of this name in the tests table"))
            continue
        for column, text, test_text in zip(COLUMNS, parts, tests_by_row[row]):
            marker = ""
            m_na, m_missing = NA_RE.search(text), MISSING_RE.search(text)
            cut = len(text)
            if m_missing:
                marker, cut = "missing", m_missing.start()
            elif m_na:
                marker, cut = "n/a", m_na.start()
            apis, tests = [], []
            for s, _e, content in code_spans(text):
                if s >= cut:
                    continue  # the reason's own code spans are prose
                m = TEST_RE.match(content)
                if m:
                    tests.append((m["path"], m["name"]))
                else:
                    apis.append(content)
            for _s, _e, content in code_spans(test_text):
                m = TEST_RE.match(content)
                if m:
                    tests.append((m["path"], m["name"]))
                else:
                    failures.append(Failure(row, column, "format", content, "the tests table names a test as `path::name`"))
            cells.append(Cell(row, column, text, apis, tests, marker, test_text))
    return cells, failures


def structural_failures(cells: list) -> list:
    out = []
    for c in cells:
        if not c.text.strip():
            out.append(Failure(c.row, c.column, "blank", "", "empty cell: name the API and its test, or say why not (— n/a: reason)"))
        elif c.marker == "missing":
            out.append(Failure(c.row, c.column, "missing", c.text, "the API is missing in this language"))
        elif c.marker == "":
            if not c.apis:
                out.append(Failure(c.row, c.column, "format", c.text, "names no API (in backticks) and gives no reason (— n/a: ...)"))
            if not c.tests:
                out.append(Failure(c.row, c.column, "format", c.text, "names no test (`path::name`)"))
    return out


# ---- tests -----------------------------------------------------------------------------------


def js_string_literals_after_test_calls(src: str) -> list:
    """The first argument of every `test(` / `it(` / `describe(` call when it is a string
    literal ('...', "..." or a template without ${}), unescaped."""
    out = []
    for m in re.finditer(r"(?<![\w.$])(?:test|it|describe)\s*\(\s*(['\"`])", src):
        quote, i, buf = m.group(1), m.end(), []
        while i < len(src):
            ch = src[i]
            if ch == "\\" and i + 1 < len(src):
                nxt = src[i + 1]
                buf.append({"n": "\n", "t": "\t"}.get(nxt, nxt))
                i += 2
                continue
            if ch == quote:
                out.append("".join(buf))
                break
            if quote == "`" and src.startswith("${", i):
                break  # interpolated: not a fixed title
            buf.append(ch)
            i += 1
    return out


def c_test_sources() -> list:
    makefile = (ROOT / "Makefile").read_text()
    m = re.search(r"^C_TEST_SRC\s*:?=\s*(.*)$", makefile, re.M)
    return m.group(1).split() if m else []


def check_test(column: str, path: str, name: str) -> str | None:
    """None when the test exists, else why not."""
    f = ROOT / path
    if not f.is_file():
        return f"no file {path}"
    src = f.read_text()
    if path.endswith(".rs"):
        m = re.search(r"#\[test\]\s*((?:#\[[^\]]*\]\s*)*)(?:pub\s+)?fn\s+" + re.escape(name) + r"\s*\(", src)
        if not m:
            return f"no #[test] fn {name} in {path}"
        if "ignore" in m.group(1):
            return f"{path}::{name} is #[ignore]d: it does not run"
    elif path.endswith(".c"):
        if path not in c_test_sources():
            return f"{path} is not in the Makefile's C_TEST_SRC (make test-c would not run it)"
        if not re.search(r"^(?:static\s+)?void\s+" + re.escape(name) + r"\s*\(", src, re.M):
            return f"no C test function {name} in {path}"
        # a call is `name(` or the fixture macros of ffi/tests/c/check.h, `RUN0(name)` .. `RUN2(name)`
        call_re = r"(?<![\w])" + re.escape(name) + r"\s*\(|\bRUN[0-9]\(\s*" + re.escape(name) + r"\s*\)"
        calls = sum(len(re.findall(call_re, (ROOT / p).read_text()))
                    for p in c_test_sources() if (ROOT / p).is_file())
        if calls < 2:
            return f"{name} is defined in {path} but never called"
    elif path.endswith(".py"):
        if not Path(path).name.startswith("test_") or not name.startswith("test_"):
            return f"pytest would not collect {path}::{name} (file and function must start with test_)"
        if not re.search(r"^\s*(?:async\s+)?def\s+" + re.escape(name) + r"\s*\(", src, re.M):
            return f"no def {name} in {path}"
    elif path.endswith((".js", ".mjs")):
        if name not in js_string_literals_after_test_calls(src):
            return f"no test titled {name!r} in {path}"
    else:
        return f"unknown test file type {path}"
    return None


# ---- APIs ------------------------------------------------------------------------------------


def split_hint(api: str) -> tuple:
    """`Name(kw=, other=)` -> ("Name", ["kw", "other"]); `Lock.acquire({ signal })` ->
    ("Lock.acquire", []) with the hint kept only as Python keywords (`x=`)."""
    m = re.match(r"^([^(]+?)\s*(?:\((.*)\))?$", api.strip(), re.S)
    if not m:
        return api, []
    path, hint = m.group(1).strip(), m.group(2) or ""
    kws = re.findall(r"(\w+)\s*=", hint)
    return path, kws


def run(cmd: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def check_rust(apis: list) -> dict:
    """{api: reason} for the Rust APIs that do not resolve against the built `baton` crate."""
    if not apis:
        return {}
    meta = json.loads(run(["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT, check=True).stdout)
    target = Path(meta["target_directory"]) / "debug"
    rlib = target / "libbaton.rlib"
    if not rlib.is_file():
        return {a: f"{rlib} is not built (cargo build -p consul-baton)" for a in apis}
    lines = ["#![allow(unused, clippy::all)]"]
    where = {}
    for api in apis:
        path, _ = split_hint(api)
        if "." in path:
            ty, field = path.rsplit(".", 1)
            expr = f"let _ = |o: baton::{ty}| {{ let _ = &o.{field}; }};"
        elif "::" in path:
            expr = f"let _ = baton::{path};"
        else:
            expr = f"let _: Option<&baton::{path}> = None;"
        where[len(lines) + 1] = api
        lines.append(f"pub fn parity_{len(lines)}() {{ {expr} }}")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "parity_rust.rs"
        src.write_text("\n".join(lines) + "\n")
        p = run([os.environ.get("RUSTC", "rustc"), "--edition", "2021", "--crate-type", "lib", "--crate-name", "parity_rust",
                 "--emit=metadata", "-o", str(Path(tmp) / "out.rmeta"), "-L", f"dependency={target / 'deps'}",
                 "--extern", f"baton={rlib}", "--error-format=json", str(src)])
    bad, stray = {}, None
    for line in p.stderr.splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        if d.get("level") != "error":
            continue
        code = (d.get("code") or {}).get("code")
        # "type annotations needed", or a trait's method named through the trait
        # (`aio::AsyncHold::acquire_async`): the path resolved
        if code in ("E0282", "E0283", "E0790"):
            continue
        api = where.get(d["spans"][0]["line_start"]) if d.get("spans") else None
        if api is not None:
            bad.setdefault(api, f"rustc: {d['message']}")
        elif not d["message"].startswith("aborting due to"):
            stray = stray or d["message"]
    if stray is not None:  # e.g. the crate could not be loaded: nothing was checked
        return {a: f"rustc: {stray}" for a in apis}
    return bad


def check_c(apis: list) -> dict:
    if not apis:
        return {}
    lines = ["#include <stddef.h>", '#include "baton.h"']
    where = {}
    for api in apis:
        path, _ = split_hint(api)
        if "." in path:
            ty, field = path.split(".", 1)
            expr = f"(void)offsetof(struct {ty}, {field});"
        elif re.fullmatch(r"[A-Z][A-Z0-9_]*", path):
            expr = f"(void)({path});"
        else:
            expr = f"(void)&{path};"
        where[len(lines) + 1] = api
        lines.append(f"void parity_{len(lines)}(void) {{ {expr} }}")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "parity_c.c"
        src.write_text("\n".join(lines) + "\n")
        cc = os.environ.get("CC", "cc")
        p = run([cc, "-std=c11", "-fsyntax-only", "-Werror=implicit-function-declaration",
                 f"-I{ROOT / 'include'}", str(src)])
    bad = {}
    for m in re.finditer(r"parity_c\.c:(\d+):\d+: error: (.*)", p.stderr):
        api = where.get(int(m.group(1)))
        if api is not None:
            bad.setdefault(api, f"cc: {m.group(2)}")
    if p.returncode != 0 and not bad:
        return {a: f"cc failed: {p.stderr.strip()[:300]}" for a in apis}
    return bad


def check_python(apis: list, module_name: str) -> dict:
    """Resolves each API in the installed `baton` (this interpreter's)."""
    if not apis:
        return {}
    import importlib
    import inspect

    try:
        base = importlib.import_module(module_name)
        importlib.import_module("consul_baton.aio")
        importlib.import_module("consul_baton.prometheus")  # imports prometheus_client only when used
    except Exception as e:  # noqa: BLE001 - reported per API
        return {a: f"cannot import {module_name}: {e} (make python-install; run with the venv's python)" for a in apis}
    root = sys.modules["consul_baton"]  # the README writes it `baton` (import consul_baton as baton)
    bad = {}
    for api in apis:
        path, kws = split_hint(api)
        parts = path.split(".")
        if parts[0] == "baton":
            obj, parts, shown = root, parts[1:], "baton"
        else:
            obj, shown = base, module_name
        try:
            for part in parts:
                shown += "." + part
                # getattr_static keeps properties and descriptors as they are (no call)
                obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
        except AttributeError:
            bad[api] = f"{shown} does not exist"
            continue
        if kws:
            fn = obj.__func__ if isinstance(obj, (staticmethod, classmethod)) else obj
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError) as e:
                bad[api] = f"cannot read the signature of {path} to check {kws}: {e}"
                continue
            lacking = [k for k in kws if k not in params or params[k].kind not in
                       (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
            if lacking:
                bad[api] = f"{path} takes no keyword {', '.join(lacking)} (it takes {list(params)})"
    return bad


NODE_PROBE = r"""
const names = JSON.parse(process.argv[1]);
const m = require(process.argv[2]);
const out = {};
for (const name of names) {
  const parts = name.split('.');
  let obj = m[parts[0]];
  if (obj === undefined) { out[name] = 'not-exported'; continue; }
  let ok = true;
  for (const p of parts.slice(1)) {
    const proto = typeof obj === 'function' ? obj.prototype : undefined;
    if (proto !== undefined && proto !== null && p in proto) { obj = undefined; continue; }
    if (obj !== undefined && obj !== null && (typeof obj === 'object' || typeof obj === 'function') && p in obj) { obj = obj[p]; continue; }
    ok = false; break;
  }
  out[name] = ok ? 'ok' : 'no-member';
}
process.stdout.write(JSON.stringify(out));
"""


def typings_field(type_name: str, field: str) -> bool:
    """Whether `interface type_name { ... field?: ... }` (or `type X = ... & { field }`) in the
    Node typings declares `field`."""
    for f in ("index.d.ts", "native.d.ts"):
        src = (ROOT / "bindings/node" / f).read_text()
        for m in re.finditer(r"(?:interface|type)\s+" + re.escape(type_name) + r"\b[^{]*\{", src):
            depth, i = 1, m.end()
            while i < len(src) and depth:
                depth += {"{": 1, "}": -1}.get(src[i], 0)
                i += 1
            if re.search(r"^\s*(?:readonly\s+)?" + re.escape(field) + r"\??\s*:", src[m.end():i], re.M):
                return True
    return False


def check_node(apis: list) -> dict:
    if not apis:
        return {}
    paths = {a: split_hint(a)[0] for a in apis}
    names = sorted(set(paths.values()))
    node = shutil.which("node")
    if node is None:
        return {a: "node is not installed" for a in apis}
    p = run([node, "-e", NODE_PROBE, json.dumps(names), str(ROOT / "bindings/node")])
    if p.returncode != 0:
        return {a: f"cannot require bindings/node (make node-build): {p.stderr.strip()[:300]}" for a in apis}
    found = json.loads(p.stdout)
    bad = {}
    for api, path in paths.items():
        state = found.get(path)
        if state == "ok":
            continue
        parts = path.split(".")
        if state == "not-exported" and len(parts) == 2 and typings_field(*parts):
            continue  # an options interface: types only, checked in the typings
        bad[api] = ("bindings/node exports no " + parts[0] + " (and no typings interface with field "
                    + ".".join(parts[1:]) + ")") if state == "not-exported" else f"{'.'.join(parts[:-1])} has no member {parts[-1]}"
    return bad


def check_cells(cells: list) -> list:
    failures = structural_failures(cells)
    live = [c for c in cells if c.text.strip()]  # also what a marked cell names before its marker
    by_column = {col: sorted({a for c in live if c.column == col for a in c.apis}) for col in COLUMNS}
    bad = {
        "Rust": check_rust(by_column["Rust"]),
        "Rust async": check_rust(by_column["Rust async"]),
        "C": check_c(by_column["C"]),
        "Python": check_python(by_column["Python"], "consul_baton"),
        "Python asyncio": check_python(by_column["Python asyncio"], "consul_baton.aio"),
        "Node": check_node(by_column["Node"]),
    }
    test_cache = {}
    for c in live:
        for api in c.apis:
            if api in bad[c.column]:
                failures.append(Failure(c.row, c.column, "api", api, bad[c.column][api]))
        for path, name in c.tests:
            key = (c.column, path, name)
            if key not in test_cache:
                test_cache[key] = check_test(c.column, path, name)
            if test_cache[key]:
                failures.append(Failure(c.row, c.column, "test", f"{path}::{name}", test_cache[key]))
    return failures


def check_text(readme: str) -> tuple:
    cells, failures = parse_table(readme)
    return cells, failures + check_cells(cells)


# ---- self-test -------------------------------------------------------------------------------


def _row_lines(page: str, row: str) -> list:
    """Indexes of the table lines (either table) whose first cell is `row`."""
    out = []
    for i, line in enumerate(page.split("\n")):
        parts = split_row(line) if line.strip().startswith("|") else []
        if parts and re.sub(r"[*_`]", "", parts[0]).strip() == row:
            out.append(i)
    return out


def rename_in_cell(page: str, cell: Cell, old: str, new: str) -> str:
    """Replaces the code span `old` by `new` in `cell`'s column of whichever of the row's two
    lines (API table, tests table) holds it."""
    lines = page.split("\n")
    col = 1 + COLUMNS.index(cell.column)
    for i in _row_lines(page, cell.row):
        parts = split_row(lines[i])
        if old in parts[col]:
            parts[col] = parts[col].replace(old, new, 1)
            lines[i] = "| " + " | ".join(parts) + " |"
            return "\n".join(lines)
    raise AssertionError(f"{old} not found in cell {cell.row}/{cell.column}")


def replace_cell(page: str, cell: Cell, new_text: str, tests_too: bool = False) -> str:
    """Sets `cell`'s API cell (and with tests_too its tests cell) to new_text."""
    lines = page.split("\n")
    idx = _row_lines(page, cell.row)
    assert len(idx) == 2, (cell.row, idx)
    for i in idx if tests_too else idx[:1]:
        parts = split_row(lines[i])
        parts[1 + COLUMNS.index(cell.column)] = new_text
        lines[i] = "| " + " | ".join(parts) + " |"
    return "\n".join(lines)


def self_test(readme: str) -> int:
    cells, failures = parse_table(readme)
    if failures:
        print("self-test: the table itself does not parse:", *failures, sep="\n")
        return 1
    # Faults are planted in cells that pass now; what fails already is expected to fail again.
    _cells, baseline = check_text(readme)
    failing = {(f.row, f.column) for f in baseline}
    live = [c for c in cells if c.marker == "" and c.apis and c.tests and (c.row, c.column) not in failing]
    expected = {(f.row, f.column, f.what, f.name) for f in baseline}
    text = readme
    used = set()
    for column in COLUMNS:
        # an API renamed in one cell and a test renamed in another, in every column
        api_cell = next(c for c in live if c.column == column and (c.row, c.column) not in used)
        used.add((api_cell.row, api_cell.column))
        api = api_cell.apis[0]
        path, _ = split_hint(api)
        suffix = "_parity_selftest_absent" if column != "Node" else "ParitySelftestAbsent"
        renamed = api.replace(path, path + suffix, 1)
        text = rename_in_cell(text, api_cell, f"`{api}`", f"`{renamed}`")
        expected.add((api_cell.row, column, "api", renamed))
        test_cell = next(c for c in live if c.column == column and (c.row, c.column) not in used)
        used.add((test_cell.row, test_cell.column))
        tpath, tname = test_cell.tests[0]
        new_name = tname + "_parity_selftest_absent"
        old_span = next(content for _s, _e, content in code_spans(test_cell.tests_text) if content == f"{tpath}::{tname}")
        # keep the span's own backtick fence (a Node title may hold backticks)
        text = rename_in_cell(text, test_cell, old_span, f"{tpath}::{new_name}")
        expected.add((test_cell.row, column, "test", f"{tpath}::{new_name}"))
    missing_cell = next(c for c in live if (c.row, c.column) not in used)
    used.add((missing_cell.row, missing_cell.column))
    text = replace_cell(text, missing_cell, "— missing: self-test")
    expected.add((missing_cell.row, missing_cell.column, "missing", "— missing: self-test"))
    blank_cell = next(c for c in live if (c.row, c.column) not in used)
    text = replace_cell(text, blank_cell, "", tests_too=True)
    expected.add((blank_cell.row, blank_cell.column, "blank", ""))

    _cells, got = check_text(text)
    got_keys = {(f.row, f.column, f.what, f.name) for f in got}
    ok = got_keys == expected
    for f in got:
        print(("  expected " if (f.row, f.column, f.what, f.name) in expected else "  UNEXPECTED ") + str(f))
    for e in sorted(expected - got_keys):
        print(f"  NOT REPORTED: {e}")
    print(f"self-test: {len(expected) - len(baseline)} faults planted ({len(baseline)} failures before), {len(got)} reported, "
          + ("exactly the planted ones" if ok else "MISMATCH"))
    return 0 if ok else 1


def convert(old: str) -> str:
    """The API table and the tests table made from a combined table (cells `APIs; tests ...`)."""
    body = old.split(BEGIN, 1)[1].split(END, 1)[0]
    lines = [ln for ln in body.splitlines() if ln.strip().startswith("|")]
    header = "| Capability | " + " | ".join(COLUMNS) + " |"
    rule = "|---" * (len(COLUMNS) + 1) + "|"
    api_lines, test_lines = [header, rule], [header, rule]
    for line in lines[2:]:
        parts = split_row(line)
        api_cells, test_cells = [], []
        for text in parts[1:]:
            spans = [(st, e, c) for st, e, c in code_spans(text) if TEST_RE.match(c)]
            tests = [text[st:e] for st, e, _c in spans]
            api = text
            for st, e, _c in reversed(spans):
                api = api[:st] + api[e:]
            api = re.sub(r";?\s*tests?\b[\s,]*$", "", api.strip()).strip().rstrip(";,").strip()
            api_cells.append(api)
            test_cells.append(", ".join(tests) if tests else "—")
        api_lines.append("| " + " | ".join([parts[0]] + api_cells) + " |")
        test_lines.append("| " + " | ".join([parts[0]] + test_cells) + " |")
    return "\n".join([BEGIN, *api_lines, END, "", TESTS_BEGIN, *test_lines, TESTS_END]) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", default=str(PAGE), help="the page holding the two tables")
    ap.add_argument("--self-test", action="store_true", help="prove the check fails on planted faults")
    ap.add_argument("--convert", metavar="FILE", help="print the two tables made from FILE's combined table")
    args = ap.parse_args()
    if args.convert:
        sys.stdout.write(convert(Path(args.convert).read_text()))
        return 0
    page = Path(args.page).read_text()
    if args.self_test:
        return self_test(page)
    cells, failures = check_text(page)
    for f in failures:
        print(f)
    failed_cells = {(f.row, f.column) for f in failures}
    print(f"{len(cells)} cells checked, {len(failed_cells)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
