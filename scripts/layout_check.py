#!/usr/bin/env python3
"""The layout rules docs/DESIGN.md states ("Modules and their dependencies"), checked:

- no import cycle between the source files of any crate of the workspace: each file's
  paths (`crate::…`, `super::…`, `self::…` and a child's bare name; outside comments,
  strings and `#[cfg(test)]` items) are resolved to the file of the longest module prefix
  they name, and the graph of files is searched for a strongly connected component of more
  than one file. A module's own file naming its own children (it declares them, re-exports
  and runs them) is not counted as importing them; a child naming its parent, or any file
  naming a sibling or a module elsewhere, is;
- no file under src/payments/ over 500 lines.

Run from the repository root: `python3 scripts/layout_check.py`. Exits 1 naming what breaks
a rule. `.ci/run` runs it.
"""
import os
import re
import sys

CRATES = ["src", "crates/wire/src", "crates/sandbox/src", "crates/chaos/src", "crates/contract/src"]
LONGEST = ("src/payments", 500)


def modules(src):
    """Module path (a tuple) -> file, for every .rs file of a crate's source folder."""
    found = {}
    for folder, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[0] == "bin":
                continue  # binaries are crates of their own
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            found[tuple(parts)] = path
    return found


def code_of(path):
    """The file's code: no comments, string contents or `#[cfg(test)]` items (tests may
    import what they test from anywhere)."""
    text = without_literals(open(path, encoding="utf-8").read())
    text = re.sub(r"pub\(in [^)]*\)", "pub", text)
    while (start := text.find("#[cfg(test)]")) >= 0:
        text = text[:start] + text[end_of_item(text, start + len("#[cfg(test)]")):]
    return text


# A raw string's opening: `r"`, `r#"`, `br##"`, … (not a raw identifier such as `r#type`).
RAW_STRING = re.compile(r'(?<![\w])[bc]?r(#*)"')


def without_literals(text):
    """`text` without its comments, and with every string and character literal emptied, read
    token by token: a regular expression over the whole text cannot tell a string continued
    by a `\\` at a line's end, a `'"'` or a lifetime from the code around them, and one
    misread literal hides every path after it."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            out.append(" ")
        elif (raw := RAW_STRING.match(text, i)) is not None:
            end = text.find('"' + raw.group(1), raw.end())
            i = n if end < 0 else end + 1 + len(raw.group(1))
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and text.startswith("\\", i + 1):
            end = text.find("'", i + 3)
            i = n if end < 0 else end + 1
            out.append("' '")
        elif c == "'" and i + 2 < n and text[i + 2] == "'":
            i += 3
            out.append("' '")
        else:
            out.append(c)  # code, or a lifetime's or label's quote
            i += 1
    return "".join(out)


def end_of_item(text, at):
    """Where the item starting at `at` ends: its `;`, or its block's closing brace."""
    depth = 0
    for i in range(at, len(text)):
        if text[i] == ";" and depth == 0:
            return i + 1
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(text)


# A path that starts at a child module, which a module may name without `self::`.
CHILD = re.compile(r"(?<![:\w])(\w+)((?:::\w+)*)(::\{[^;]*?\})?")
PATH = re.compile(r"\b(crate|super|self)((?:::\w+)*)(::\{[^;]*?\})?")


def imports(module, path, mods):
    """The modules (files) `module` names by path."""
    # `super` is the parent module, whether the file is `x.rs` or `x/mod.rs`.
    parent = list(module[:-1])
    named = set()
    code = code_of(path)
    children = [
        m for m in CHILD.finditer(code)
        if m.group(1) not in ("crate", "super", "self") and module + (m.group(1),) in mods
        and (m.group(2) or m.group(3))
    ]
    for found in list(PATH.finditer(code)) + children:
        head, tail, group = found.groups()
        if not tail and not group:
            continue
        if head not in ("crate", "super", "self"):
            tail, head = "::" + head + (tail or ""), "self"
        parts = [p for p in tail.strip(":").split("::") if p]
        if head == "crate":
            base = []
        elif head == "self":
            base = list(module)
        else:
            base = parent[:]
            while parts and parts[0] == "super":
                base = base[:-1]
                parts = parts[1:]
        wholes = [parts]
        if group:
            for item in group.strip(":{}").split(","):
                item = item.strip().split(" as ")[0].strip()
                if item and item != "self":
                    wholes.append(parts + item.split("::"))
        for whole in wholes:
            full = base + [p for p in whole if p]
            target = next(
                tuple(full[:k]) for k in range(len(full), -1, -1) if tuple(full[:k]) in mods
            )
            # A module's own file declares its children (`mod x;`), re-exports and runs them:
            # that is what the file is for, not an import. Every other path is one.
            if target[: len(module)] != module and target != ():
                named.add(target)
    return named


def cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10_000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in edges:
        if v not in index:
            visit(v)
    return found


def main():
    broken = []
    for src in CRATES:
        mods = modules(src)
        edges = {m: imports(m, p, mods) & set(mods) for m, p in mods.items()}
        found = cycles(edges)
        for component in found:
            names = ", ".join(sorted(mods[m] for m in component))
            broken.append(f"import cycle in {src}: {names}")
        if not found:
            print(f"{src}: {len(mods)} files, no import cycle")
    folder, limit = LONGEST
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                lines = sum(1 for _ in open(path, encoding="utf-8"))
                if lines > limit:
                    broken.append(f"{path}: {lines} lines (at most {limit} under {folder}/)")
    for problem in broken:
        print(problem)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
