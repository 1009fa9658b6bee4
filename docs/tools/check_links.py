#!/usr/bin/env python3
"""Checks every link of the built book and of the Markdown pages outside it, offline.

* The book (`--book DIR`, default target/book): every `href` and `src` of every HTML page
  (rustdoc's own pages under api/rust excepted: rustdoc checks those) that is not an external
  URL must name a file that exists, and a `#fragment` must be an `id` (or `name`) in the page it
  points to.
* Markdown pages (`--markdown FILE ...`, default README.md and the package pages): every relative
  link and image must name a file or directory of the repository, and a `#fragment` must be
  the anchor GitHub makes of a heading of the target page.

External links (http, https, mailto) are counted, not fetched. Prints each broken link with
the page it is on; the last line is `links: N passed, N failed`. `--self-test` plants broken
links (a missing page, a missing anchor, in HTML and Markdown) and fails unless each is found.
"""

import argparse
import html.parser
import os
import re
import sys
import tempfile
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # docs/tools/ -> root
PACKAGE_PAGES = ["core/README.md", "bindings/python/README.md", "bindings/node/README.md",
                 "devserver/README.md", "cli/README.md", "ffi/README.md"]
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k in ("id", "name") and v:
                self.ids.add(v)
            if k in ("href", "src") and v is not None and not (tag == "link" and k == "href" and v.endswith(".css") is False and False):
                self.links.append(v)


_html_cache = {}


def parse_html(path):
    if path not in _html_cache:
        p = Links()
        with open(path, encoding="utf-8", errors="replace") as f:
            p.feed(f.read())
        _html_cache[path] = p
    return _html_cache[path]


def check_book(book):
    ok, bad, external = 0, [], 0
    for dirpath, dirnames, files in os.walk(book):
        rel_dir = os.path.relpath(dirpath, book)
        if rel_dir == os.path.join("api", "rust") or rel_dir.startswith(os.path.join("api", "rust") + os.sep):
            dirnames[:] = []
            continue
        for name in files:
            if not name.endswith(".html") or name in ("print.html", "404.html", "toc.html"):
                continue
            page = os.path.join(dirpath, name)
            for link in parse_html(page).links:
                if EXTERNAL.match(link) or link.startswith("//"):
                    external += 1
                    continue
                url = urllib.parse.urlsplit(link)
                path = urllib.parse.unquote(url.path)
                target = page if not path else os.path.normpath(os.path.join(dirpath, path))
                if os.path.isdir(target):
                    target = os.path.join(target, "index.html")
                where = os.path.relpath(page, book)
                if not os.path.exists(target):
                    bad.append(f"{where}: {link}: no such file")
                    continue
                if url.fragment and target.endswith(".html"):
                    frag = urllib.parse.unquote(url.fragment)
                    if frag not in parse_html(target).ids:
                        bad.append(f"{where}: {link}: no id {frag!r} in {os.path.relpath(target, book)}")
                        continue
                ok += 1
    return ok, bad, external


def github_anchors(md_text):
    """The anchors GitHub gives the headings of a Markdown page."""
    anchors, seen = set(), {}
    in_fence = False
    for line in md_text.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        m = None if in_fence else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))
        slug = re.sub(r"[^\w\- ]", "", text.lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


MD_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"")


def markdown_links(text):
    out, in_fence = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        line = re.sub(r"`[^`]*`", "", line)
        for m in MD_LINK.finditer(line):
            out.append(m.group(1) or m.group(2))
    return out


def check_markdown(files, root=ROOT):
    ok, bad, external = 0, [], 0
    for rel in files:
        page = os.path.join(root, rel)
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for link in markdown_links(text):
            if EXTERNAL.match(link):
                external += 1
                continue
            url = urllib.parse.urlsplit(link)
            path = urllib.parse.unquote(url.path)
            target = page if not path else os.path.normpath(os.path.join(os.path.dirname(page), path))
            if not os.path.exists(target):
                bad.append(f"{rel}: {link}: no such file")
                continue
            if url.fragment:
                if not target.endswith(".md"):
                    bad.append(f"{rel}: {link}: a fragment on a page that is not Markdown")
                    continue
                with open(target, encoding="utf-8") as f:
                    if url.fragment not in github_anchors(f.read()):
                        bad.append(f"{rel}: {link}: no heading makes #{url.fragment}")
                        continue
            ok += 1
    return ok, bad, external


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "book", "guide"))
        with open(os.path.join(tmp, "book", "guide", "a.html"), "w") as f:
            f.write('<h2 id="here">x</h2><a href="b.html">b</a><a href="b.html#there">b</a>'
                    '<a href="missing.html">m</a><a href="b.html#nowhere">n</a><a href="#here">h</a>'
                    '<img src="../img/none.svg"><a href="https://example.invalid/">x</a>')
        with open(os.path.join(tmp, "book", "guide", "b.html"), "w") as f:
            f.write('<h2 id="there">y</h2>')
        ok, bad, ext = check_book(os.path.join(tmp, "book"))
        want_book = {"missing.html", "b.html#nowhere", "../img/none.svg"}
        with open(os.path.join(tmp, "README.md"), "w") as f:
            f.write("# Top\n\n## Some `code` here\n\n[a](docs/x.md) [b](README.md#some-code-here) "
                    "[c](#top) [d](#nope) [e](docs/missing.md) ![i](docs/x.md#nothing) `[f](not/a/link.md)`\n")
        os.makedirs(os.path.join(tmp, "docs"))
        with open(os.path.join(tmp, "docs", "x.md"), "w") as f:
            f.write("# X\n")
        mok, mbad, _ = check_markdown(["README.md"], root=tmp)
        want_md = {"#nope", "docs/missing.md", "docs/x.md#nothing"}
        found_book = {b.split(": ")[1] for b in bad}
        found_md = {b.split(": ")[1] for b in mbad}
        good = found_book == want_book and ok == 3 and ext == 1 and found_md == want_md and mok == 3
        print(f"link checker self-test: book found {sorted(found_book)}, {ok} good; markdown found {sorted(found_md)}, {mok} good: "
              + ("as planted" if good else "MISMATCH"))
        return 0 if good else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--book", default=os.path.join(ROOT, "target", "book"))
    ap.add_argument("--markdown", nargs="*", default=["README.md"] + PACKAGE_PAGES)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    ok, bad, ext = check_book(args.book) if args.book else (0, [], 0)
    mok, mbad, mext = check_markdown(args.markdown)
    for b in bad + mbad:
        print("BROKEN", b)
    print(f"({ext + mext} external links not fetched)")
    print(f"links: {ok + mok} passed, {len(bad) + len(mbad)} failed")
    return 1 if bad or mbad else 0


if __name__ == "__main__":
    sys.exit(main())
