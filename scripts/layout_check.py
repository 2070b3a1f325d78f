#!/usr/bin/env python3
"""The layout rules docs/DESIGN.md states ("Modules and their dependencies"), checked:

- no import cycle between the source files of any crate of the workspace: each file's
  paths (`crate::…`, `super::…`, `self::…` and a child's bare name; outside comments,
  strings and `#[cfg(test)]` items) are resolved to the file of the longest module prefix
  they name, and the graph of files is searched for a strongly connected component of more
  than one file. A module's own file naming its own children (it declares them, re-exports
  and runs them) is not counted as importing them; a child naming its parent, or any file
  naming a sibling or a module elsewhere, is;
- payorch's layering: every import between payorch's top-level modules (`src/*`) points down
  the table LAYERS, and an import through one of DOORS names only the door's file; a
  top-level module missing from the table is an error. The table is printed when it holds;
- docs/DESIGN.md's list of modules is the table's (the leaves left out), each with what it
  imports: a list that says otherwise is an error;
- docs/DESIGN.md's list of the files of `payments` names each file once, each with exactly the
  files of `payments` it imports, all on lines below it;
- no file under src/payments/ over 500 lines.

Comments, string and character literals are read token by token (`without_literals`), and a
self-test runs first on what a regular expression got wrong before: a string continued by a
`\\` at a line's end hid the paths after it.

Run from the repository root: `python3 scripts/layout_check.py`. Exits 1 naming what breaks
a rule. `.ci/run` runs it.
"""
import os
import re
import sys

CRATES = ["src", "crates/wire/src", "crates/sandbox/src", "crates/chaos/src", "crates/contract/src"]
LONGEST = ("src/payments", 500)

# payorch's top-level modules, top to bottom (docs/DESIGN.md, "Modules and their
# dependencies"): a module imports only modules on rows below its own, so a request's data
# flows one way, from `http` through the domain to the edges, and nothing at an edge (`db`,
# `providers`, `telemetry`) or in `events` reaches up into `http` or `payments`. Modules on
# one row import none of each other. A new top-level module must be given its row here.
LAYERS = [
    ("commands",),
    ("config",),
    ("wiring",),
    ("app",),
    ("http",),
    ("delivery",),
    ("views",),
    ("events",),
    ("payments",),
    ("idempotency",),
    ("credentials",),
    ("accounts",),
    ("provider_specs",),
    ("providers",),
    ("db",),
    ("telemetry",),
    ("rate_limit",),
    ("bounded_map", "fields", "ids", "lasting", "sealing", "secret_files", "words"),
]
# Used where needed, so the module list of docs/DESIGN.md leaves them out.
LEAVES = {"rate_limit", "bounded_map", "fields", "ids", "lasting", "sealing", "secret_files", "words"}
# The module list of docs/DESIGN.md: the fenced block after this sentence's opening.
DESIGN = ("docs/DESIGN.md", "The modules in layers,")
# A narrow interface: what a module may import of one below it is only this one file. An
# event keeps the rows of payments as they were (the outbox's snapshot) and shows them as
# `GET` does, so `events` reads payments' values, through `payments::snapshot` alone.
DOORS = {("events", "payments"): ("payments", "snapshot")}


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


def layering(mods, edges):
    """Every import of a top-level module from one on its row or above it, and every import
    through a door of anything but the door's own file."""
    row = {name: i for i, names in enumerate(LAYERS) for name in names}
    broken = [
        f"src/{name}: a top-level module with no row in LAYERS (scripts/layout_check.py)"
        for name in sorted({m[0] for m in mods if m} - set(row))
    ]
    for source in sorted(m for m in edges if m):
        for target in sorted(t for t in edges[source] if t and t[0] != source[0]):
            door = DOORS.get((source[0], target[0]))
            if door is not None:
                allowed = target[: len(door)] == door
            else:
                allowed = row.get(source[0], -1) < row.get(target[0], -1)
            if not allowed and door is not None:
                broken.append(
                    f"{mods[source]} imports {'::'.join(target)}: {source[0]} may import "
                    f"{target[0]} only through {'::'.join(door)} (DOORS)"
                )
            elif not allowed:
                broken.append(
                    f"{mods[source]} imports {'::'.join(target)}: {source[0]} may import only "
                    f"modules on rows below its own (LAYERS)"
                )
    return broken


def design_list(mods, edges):
    """docs/DESIGN.md's list of modules, held to the truth: the modules of LAYERS but the
    leaves, in its order, each with exactly the modules (but the leaves) it imports."""
    path, opening = DESIGN
    text = open(path, encoding="utf-8").read()
    start = text.find("```\n", text.find(opening)) + 4
    block = text[start:text.find("```", start)]
    entries = {}
    for line in block.splitlines():
        if line and not line[0].isspace():
            current = line.split()[0]
            entries[current] = line[len(current):]
        elif line.strip():
            entries[current] += " " + line.strip()
    listed = {}
    for name, entry in entries.items():
        entry = re.sub(r"\([^()]*\)", "", entry).split(";")[0]  # notes; the sandbox crate
        listed[name] = {w.split("::")[0] for w in re.findall(r"[a-z_]+(?:::[a-z_]+)*", entry)}
    actual = {}
    for source, targets in edges.items():
        if source:
            actual.setdefault(source[0], set()).update(
                t[0] for t in targets if t and t[0] != source[0] and t[0] not in LEAVES
            )
    order = [name for names in LAYERS for name in names if name not in LEAVES]
    broken = []
    if list(listed) != order:
        broken.append(f"{path}: the module list names {list(listed)}, LAYERS {order}")
    for name in order:
        if name in listed and listed[name] != actual.get(name, set()):
            broken.append(
                f"{path}: the module list says {name} imports {sorted(listed[name])}; "
                f"it imports {sorted(actual.get(name, set()))}"
            )
    return broken


# The file list of `payments` in docs/DESIGN.md: the fenced block after this sentence's end.
PAYMENTS_LIST = ("docs/DESIGN.md", "imports only files below it in this list")


def payments_list(mods, edges):
    """docs/DESIGN.md's list of the files of `payments`, held to the truth: every file of the
    folder named once (its `mod.rs` by the folder's name), each line with exactly the files
    of `payments` it imports, and each of those on a line below it."""
    path, opening = PAYMENTS_LIST
    text = open(path, encoding="utf-8").read()
    start = text.find("```\n", text.find(opening)) + 4
    block = text[start:text.find("```", start)]
    # A line `file ─► files` names what a file imports; the lines without an arrow, at the
    # end, the files that import no other file of payments.
    lines, quiet = [], []
    for line in block.splitlines():
        if "\u2500\u25ba" in line:
            name, targets = line.split("\u2500\u25ba")
            lines.append(([name.strip()], targets))
        else:
            quiet += expand(line.split("(")[0])
    lines.append((quiet, ""))
    order, listed = [], {}
    for names, targets in lines:
        for name in names:
            order.append(name)
            listed[name] = set(expand(targets))
    files = {
        "::".join(m[1:]) for m in mods if len(m) > 1 and m[0] == "payments"
    }
    actual = {
        "::".join(source[1:]): {
            "::".join(t[1:]) for t in targets
            if len(t) > 1 and t[0] == "payments" and t != source
        }
        for source, targets in edges.items()
        if len(source) > 1 and source[0] == "payments"
    }
    broken = []
    for name in sorted(files - set(order)):
        broken.append(f"{path}: payments' file list leaves out {name}")
    for name in sorted(set(order) - files):
        broken.append(f"{path}: payments' file list names {name}, which is no file")
    if len(order) != len(set(order)):
        broken.append(f"{path}: payments' file list names a file twice")
    below = {name: set(order[i + 1:]) for i, name in enumerate(order)}
    for name in order:
        if name not in files:
            continue
        if listed[name] != actual.get(name, set()):
            broken.append(
                f"{path}: payments' file list says {name} imports {sorted(listed[name])}; "
                f"it imports {sorted(actual.get(name, set()))}"
            )
        elif not listed[name] <= below[name]:
            broken.append(
                f"{path}: in payments' file list {name} imports "
                f"{sorted(listed[name] - below[name])}, not below it"
            )
    return broken


def expand(names):
    """`a, b::{c, d::e}` as `a`, `b::c`, `b::d::e`."""
    found = []
    for head, group, single in re.findall(r"([a-z_]+(?:::[a-z_]+)*)::\{([^}]*)\}|([a-z_]+(?:::[a-z_]+)*)", names):
        if group:
            found += [f"{head}::{item.strip()}" for item in group.split(",") if item.strip()]
        elif single:
            found.append(single)
    return found


def print_layers():
    for names in LAYERS:
        doors = [
            f"(of {below}, only {'::'.join(door)})"
            for (above, below), door in DOORS.items()
            if above in names
        ]
        print("  " + " ".join([", ".join(names)] + doors))


def self_test():
    """The reading of literals, on what misled it before: a string continued by `\\` at a
    line's end (payments/metrics.rs's help texts hid its import of telemetry), a `'"'`, a
    raw string and a lifetime."""
    continued = without_literals('"one \\\n two"; use crate::telemetry::metrics; let b = "";')
    assert "crate::telemetry::metrics" in continued and "two" not in continued, continued
    code = without_literals(
        "let q = '\"'; let e = '\\''; use crate::db;\n"
        'let r = r#"a "quoted" word"#; fn f<\'a>(x: &\'a str) {}\n'
        "/* a /* nested */ comment */ use crate::ids;\n"
    )
    assert "crate::db" in code and "crate::ids" in code, code
    assert "quoted" not in code and "nested" not in code and "<'a>" in code, code


def main():
    self_test()
    broken = []
    for src in CRATES:
        mods = modules(src)
        edges = {m: imports(m, p, mods) & set(mods) for m, p in mods.items()}
        if src == "src":
            layers = layering(mods, edges) + design_list(mods, edges) + payments_list(mods, edges)
            broken += layers
            if not layers:
                print("src: every import points down this table of layers (top first):")
                print_layers()
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
