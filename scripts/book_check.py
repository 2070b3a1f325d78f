#!/usr/bin/env python3
"""The book under docs/ builds, and every link in it leads somewhere.

1. `mdbook build docs` (the pinned version, MDBOOK_VERSION below; `.ci/run` installs it) into
   target/book (docs/book.toml). A warning or error from mdBook fails the check, and so does an
   `{{#include …}}` or `{{#rustdoc_include …}}` left in the output (a file it could not read).
2. Every `href` and `src` of every page of the build:
   - a relative link must name a file of the build (a folder: its index.html), and its
     `#fragment` an `id` of that page (mdBook gives every heading one);
   - a relative link that leaves the book (`../src/lib.rs`, `../../README.md`) must name a file
     of the repository that exists, and its fragment a heading of that file if it is Markdown.
     Such a link works where the pages are read on a forge, but not in the built book, which
     holds only docs/: it is allowed, counted and listed, and a page should prefer a link into
     the book or a path written as code (`src/lib.rs`);
   - http(s) and mailto links are counted but not fetched: CI has no network, and a check that
     fetched would fail on someone else's outage.
3. Every page under docs/ is a chapter: one SUMMARY.md leaves out is not in the book at all.
4. The same rules for the README's own relative links, which a forge shows beside docs/.
   A heading's id in a Markdown file is made as mdBook makes it (`slug`), and every page of
   the book holds the rule to mdBook's own ids, so it cannot drift from them unseen.

A failure names the Markdown source and its line (the HTML page and its line where no source
line holds the link) and what is wrong. Run from anywhere: `python3 scripts/book_check.py`.
Exits 1 on any failure. `.ci/run` runs it.
"""
import html.parser
import os
import re
import subprocess
import sys
import urllib.parse

MDBOOK_VERSION = "0.5.4"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
BUILD = os.path.join(ROOT, "target", "book")

# mdBook's own pages, which have no Markdown source.
GENERATED = {"print.html", "toc.html", "404.html"}


class Links(html.parser.HTMLParser):
    """The links (attribute, value, line) and the ids of one HTML page."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        line = self.getpos()[0]
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            elif name in ("href", "src"):
                self.links.append((value, line))

    handle_startendtag = handle_starttag


def parse(path):
    parser = Links()
    with open(path, encoding="utf-8") as f:
        parser.feed(f.read())
    return parser


def slug(title):
    """A heading's id as mdBook and the forges make it: lower case, spaces to '-', other
    punctuation dropped (letters and digits of any script kept)."""
    # HTML tags are dropped, but not what a code span shows (`<KEY_ID>` is text).
    parts = title.split("`")
    text = "".join(p if i % 2 else re.sub(r"<[^>]+>", "", p) for i, p in enumerate(parts))
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return "".join(
        c if c.isalnum() or c in "-_" else "-" if c == " " else "" for c in text.lower()
    )


def markdown_anchors(path):
    """The ids of a Markdown file's headings outside code fences (a repeated one numbered -1,
    -2, …), and explicit `<a name>`/`id` anchors."""
    anchors, seen, fenced = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced:
                continue
            m = re.match(r"(#{1,6}) +(.*?)#*\s*$", line)
            if m:
                base = slug(m.group(2).strip())
                n = seen.get(base, 0)
                seen[base] = n + 1
                anchors.add(base if n == 0 else f"{base}-{n}")
            anchors.update(re.findall(r"""<[a-zA-Z][^>`]*\s(?:id|name)=["']([^"']+)["']""", line))
    return anchors


def source_of(page):
    """The Markdown file under docs/ that a page of the build was made from."""
    rel = os.path.relpath(page, BUILD)
    if rel in GENERATED:
        return None
    stem = rel[: -len(".html")]
    for candidate in (stem + ".md", os.path.join(os.path.dirname(stem), "README.md")
                      if os.path.basename(stem) == "index" else None):
        if candidate and os.path.isfile(os.path.join(DOCS, candidate)):
            return os.path.join(DOCS, candidate)
    return None


def where(page, html_line, href):
    """file:line of a link: in its Markdown source when a line there holds it (written with .md
    for .html, or its fragment alone), else in the HTML page."""
    source = source_of(page)
    if source:
        path, _, fragment = href.partition("#")
        wanted = [href, href.replace(".html", ".md")]
        if path.endswith("index.html"):
            wanted.append(path[: -len("index.html")] + "README.md" + ("#" + fragment if fragment else ""))
        if fragment:
            wanted.append("#" + fragment)
        with open(source, encoding="utf-8") as f:
            lines = f.readlines()
        for want in wanted:
            for i, line in enumerate(lines, 1):
                if want and want in line:
                    return f"{os.path.relpath(source, ROOT)}:{i}"
    return f"{os.path.relpath(page, ROOT)}:{html_line}"


def outside(target_in_build):
    """The repository file a link that leaves the build names: the same path from docs/
    (the book's sources sit where the build's pages do), .html read back as .md."""
    rel = os.path.relpath(target_in_build, BUILD)
    path = os.path.normpath(os.path.join(DOCS, rel))
    if not os.path.exists(path) and path.endswith(".html"):
        md = path[: -len(".html")] + ".md"
        if os.path.exists(md):
            return md
        if os.path.basename(path) == "index.html":
            readme = os.path.join(os.path.dirname(path), "README.md")
            if os.path.exists(readme):
                return readme
    return path


class Report:
    def __init__(self):
        self.problems = []
        self.checked = 0
        self.external = set()
        self.leaving = set()

    def problem(self, at, text):
        self.problems.append(f"{at}: {text}")


def check_fragment(report, at, href, target, fragment, ids_of):
    if not fragment:
        return
    fragment = urllib.parse.unquote(fragment)
    ids = ids_of(target)
    if ids is not None and fragment not in ids:
        report.problem(at, f"{href}: {os.path.relpath(target, ROOT)} has no id '{fragment}'")


def check_build(report):
    pages = []
    for folder, _, files in os.walk(BUILD):
        pages += [os.path.join(folder, f) for f in files if f.endswith(".html")]
    parsed = {page: parse(page) for page in sorted(pages)}
    md_anchors = {}

    def ids_of(target):
        if target in parsed:
            return parsed[target].ids
        if target.endswith(".md"):
            if target not in md_anchors:
                md_anchors[target] = markdown_anchors(target)
            return md_anchors[target]
        return None

    # The ids read from Markdown (for links into the README and other files outside the book)
    # are made by `slug`: each must be one mdBook made from the same page, or that rule has
    # drifted from mdBook's and those fragment checks would be wrong.
    for page, links in parsed.items():
        source = source_of(page)
        for anchor in sorted(markdown_anchors(source) - links.ids if source else ()):
            report.problem(os.path.relpath(source, ROOT),
                           f"heading id '{anchor}' (book_check's slug) is not one mdBook made: "
                           "correct slug()")

    for page, links in parsed.items():
        # The print page repeats every chapter with its links rewritten to its own ids; the
        # chapters themselves are checked.
        if os.path.basename(page) == "print.html" and os.path.dirname(page) == BUILD:
            continue
        # The 404 page is served at any depth, so its links are absolute from the site's root
        # (`<base href="/">`); they are the sidebar's, checked on every other page.
        if os.path.basename(page) == "404.html" and os.path.dirname(page) == BUILD:
            continue
        for href, line in links.links:
            report.checked += 1
            scheme = urllib.parse.urlsplit(href).scheme
            if scheme in ("http", "https", "mailto"):
                report.external.add(href)
                continue
            if scheme in ("data", "javascript") or href.startswith("//"):
                continue
            path, _, fragment = href.partition("#")
            path = urllib.parse.unquote(path.split("?")[0])
            if not path:
                check_fragment(report, where(page, line, href), href, page, fragment, ids_of)
                continue
            target = os.path.normpath(os.path.join(os.path.dirname(page), path))
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if os.path.commonpath([target, BUILD]) == BUILD:
                if not os.path.isfile(target):
                    report.problem(where(page, line, href), f"{href}: no such page or file in the book")
                    continue
                check_fragment(report, where(page, line, href), href, target, fragment, ids_of)
                continue
            repo_file = outside(target)
            if os.path.commonpath([repo_file, ROOT]) != ROOT or not os.path.exists(repo_file):
                report.problem(where(page, line, href),
                               f"{href}: leaves the book for {os.path.relpath(repo_file, ROOT)}, "
                               "which does not exist")
                continue
            report.leaving.add(os.path.relpath(repo_file, ROOT))
            if os.path.isfile(repo_file):
                check_fragment(report, where(page, line, href), href, repo_file, fragment, ids_of)


def check_every_page_is_a_chapter(report):
    """A page under docs/ that SUMMARY.md does not list is not in the book at all (mdBook
    renders only the chapters it lists), though a forge shows it."""
    for folder, _, files in os.walk(DOCS):
        for name in sorted(files):
            if not name.endswith(".md") or (folder == DOCS and name == "SUMMARY.md"):
                continue
            rel = os.path.relpath(os.path.join(folder, name), DOCS)
            stem = rel[: -len(".md")]
            html = "index.html" if rel == "README.md" else stem + ".html"
            if not os.path.isfile(os.path.join(BUILD, html)):
                report.problem(f"docs/{rel}:1", "not a chapter of the book: add its entry to "
                                                "docs/SUMMARY.md")


def check_readme(report):
    readme = os.path.join(ROOT, "README.md")
    with open(readme, encoding="utf-8") as f:
        lines = f.readlines()
    link = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|(?:href|src)=\"([^\"]+)\"")
    fenced = False
    for i, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or line.startswith("    "):
            continue
        for m in link.finditer(line):
            href = m.group(1) or m.group(2)
            report.checked += 1
            scheme = urllib.parse.urlsplit(href).scheme
            if scheme:
                report.external.add(href)
                continue
            path, _, fragment = href.partition("#")
            target = os.path.normpath(os.path.join(ROOT, urllib.parse.unquote(path))) if path else readme
            at = f"README.md:{i}"
            if os.path.commonpath([target, ROOT]) != ROOT or not os.path.exists(target):
                report.problem(at, f"{href}: no such file in the repository")
                continue
            if fragment and target.endswith(".md"):
                if urllib.parse.unquote(fragment) not in markdown_anchors(target):
                    report.problem(at, f"{href}: {os.path.relpath(target, ROOT)} has no heading "
                                       f"whose id is '{fragment}'")


def build():
    try:
        version = subprocess.run(["mdbook", "--version"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        version = ""
    if version.split() != ["mdbook", f"v{MDBOOK_VERSION}"]:
        sys.exit(f"book_check: mdbook {MDBOOK_VERSION} is needed (found: {version.strip() or 'none'}): "
                 f"cargo install mdbook --locked --version {MDBOOK_VERSION} "
                 "--no-default-features --features search")
    run = subprocess.run(["mdbook", "build", DOCS], capture_output=True, text=True,
                         env={**os.environ, "RUST_LOG": "warn", "NO_COLOR": "1"})
    output = (run.stdout + run.stderr).strip()
    if run.returncode != 0 or re.search(r"\b(WARN|ERROR)\b", output):
        sys.exit(f"book_check: mdbook build docs failed or warned:\n{output}")
    leftovers = []
    for folder, _, files in os.walk(BUILD):
        for name in files:
            if name.endswith(".html"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    for i, line in enumerate(f, 1):
                        if re.search(r"\{\{#(rustdoc_)?include", line):
                            leftovers.append(f"{os.path.relpath(path, ROOT)}:{i}: an include mdBook did not resolve")
    return leftovers


def main():
    report = Report()
    report.problems += build()
    check_build(report)
    check_every_page_is_a_chapter(report)
    check_readme(report)
    print(f"book_check: mdbook {MDBOOK_VERSION} built docs/ into {os.path.relpath(BUILD, ROOT)}; "
          f"{report.checked} links checked, {len(report.external)} distinct http(s) links listed "
          f"but not fetched, {len(report.leaving)} repository files linked from outside the book",
          flush=True)
    for path in sorted(report.leaving):
        print(f"  outside the book: {path}", flush=True)
    if report.problems:
        print(f"book_check: {len(report.problems)} problems:", file=sys.stderr)
        for problem in report.problems:
            print(f"  {problem}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
