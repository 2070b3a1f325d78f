#!/usr/bin/env python3
"""The dashboard and the alert rules name only what payorch exports (docs/operations/monitoring.md, "Monitoring").

Reads every metric payorch registers from its source (each `Opts::new("name"`,
`IntGauge::new("name"`, `HistogramOpts::new("name"` … under src/, with the label names of
the `…Vec`s), served under the registry's prefix `payorch_`. Then:

- every `payorch_…` name in ops/grafana/payorch.json, ops/prometheus/alerts.yml and its
  tests is one of them (a histogram's `_bucket`, `_sum` and `_count` included);
- every label a dashboard query or an alert's expression groups by, keeps or matches on is
  a label of a metric it reads, or one Prometheus adds (`job`, `instance`, and `le` of a
  histogram's buckets).

- every dashboard query parses as PromQL (`promtool check rules` on them as recording rules,
  Grafana's variables filled in), when promtool is installed, as in CI.

A series registered only when first observed is not in a fresh scrape, so the names are read
from the registrations, where every one of them stands. Run by .ci/run; exits 1 naming each
name or label that is not payorch's. Checks itself first on a query it must refuse.
"""

import json
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PREFIX = "payorch_"
# Labels Prometheus attaches or a histogram's buckets carry, on every series.
ALWAYS = {"job", "instance", "le"}

REGISTRATION = re.compile(
    r"\b(?:Int)?(Counter|Gauge|Histogram)(Vec)?::(?:new|with_opts)\(\s*"
    r"(?:(?:Histogram)?Opts::new\(\s*)?\"([a-z_][a-z0-9_]*)\""
)
LABELS = re.compile(r"&\[([^\]]*)\]")
NAME = re.compile(r"\bpayorch_[a-z0-9_]+")
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def registered(src):
    """{served series name: set of its labels} (a histogram's three series each), and the
    families' own names, which prose names a histogram by."""
    families = {}
    bases = set()
    for path in sorted(src.rglob("*.rs")):
        text = path.read_text()
        for found in REGISTRATION.finditer(text):
            kind, vec, name = found.groups()
            labels = set()
            if vec:
                listed = LABELS.search(text, found.end())
                if listed is None:
                    sys.exit(f"{path}: {name}: no label list after its registration")
                labels = set(re.findall(r"\"([a-z_][a-z0-9_]*)\"", listed.group(1)))
            full = PREFIX + name
            bases.add(full)
            if kind == "Histogram":
                for series in ("_bucket", "_sum", "_count"):
                    families[full + series] = labels
            else:
                families[full] = labels
    return families, bases


def problems_in(expr, where, families):
    """What in one PromQL expression is not payorch's."""
    found = []
    names = set(NAME.findall(expr))
    unknown = sorted(n for n in names if n not in families)
    found += [f"{where}: {n} is no metric payorch registers" for n in unknown]
    known = set().union(*(families[n] for n in names if n in families)) | ALWAYS
    used = set()
    for group in GROUPING.findall(expr):
        used |= {label.strip() for label in group.split(",") if label.strip()}
    for matchers in MATCHERS.findall(expr):
        used |= set(MATCHER_LABEL.findall(matchers))
    if names and not unknown:
        found += [
            f"{where}: label {label} is on none of {', '.join(sorted(names))}"
            for label in sorted(used - known)
        ]
    return found


def dashboard_exprs(path):
    dashboard = json.loads(path.read_text())
    panels = list(dashboard["panels"])
    for panel in dashboard["panels"]:
        panels += panel.get("panels", [])
    for panel in panels:
        for target in panel.get("targets", []):
            yield f"{path.name}, panel {panel['title']!r}", target["expr"]


def rule_exprs(path):
    """Each alert's `expr:`, one line or a folded block, without a YAML library."""
    alert = None
    lines = path.read_text().splitlines()
    for at, line in enumerate(lines):
        named = re.match(r"\s*- alert: (\S+)", line)
        if named:
            alert = named.group(1)
        expr = re.match(r"(\s*)expr: (.*)", line)
        if not expr:
            continue
        indent, rest = expr.groups()
        if rest.strip() not in (">-", ">", "|", "|-"):
            yield f"{path.name}, {alert}", rest
            continue
        block = []
        for more in lines[at + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= len(indent):
                break
            block.append(more.strip())
        yield f"{path.name}, {alert}", " ".join(block)


# Grafana's variables as a query sees them once filled in.
VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1m",
    "$job": "payorch",
    "$instance": ".*",
}


def unparsable(exprs):
    """The dashboard queries promtool refuses, as its message says; none without promtool."""
    promtool = shutil.which("promtool")
    if promtool is None:
        print("monitoring: no promtool, the queries' syntax is not checked", file=sys.stderr)
        return []
    rules = {"groups": [{"name": "dashboard", "rules": []}]}
    for at, (where, expr) in enumerate(exprs):
        for variable, value in VARIABLES.items():
            expr = expr.replace(variable, value)
        rules["groups"][0]["rules"].append({"record": f"dashboard:query_{at}", "expr": expr})
    # JSON is YAML, so promtool reads the rules as they are written here.
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as file:
        json.dump(rules, file)
        file.flush()
        checked = subprocess.run(
            [promtool, "check", "rules", file.name], capture_output=True, text=True
        )
    if checked.returncode == 0:
        return []
    return [f"dashboard queries refused by promtool: {checked.stdout}{checked.stderr}"]


def main():
    families, bases = registered(ROOT / "src")
    if len(families) < 20 or "payorch_http_requests_total" not in families:
        sys.exit(f"read only {len(families)} metrics from src/: is REGISTRATION still right?")
    # The check refuses what it must: a name payorch does not have, a label a metric lacks.
    refused = problems_in("rate(payorch_no_such_total[5m])", "self-check", families)
    refused += problems_in(
        'sum by (rout) (payorch_http_requests_total{methd="GET"})', "self-check", families
    )
    if len(refused) != 3:
        sys.exit(f"the check let through what it must refuse: {refused}")

    problems = []
    dashboard = ROOT / "ops/grafana/payorch.json"
    exprs = list(dashboard_exprs(dashboard))
    problems += unparsable(exprs)
    rules = ROOT / "ops/prometheus/alerts.yml"
    exprs += list(rule_exprs(rules))
    for where, expr in exprs:
        problems += problems_in(expr, where, families)
    # Names anywhere else in these files too: descriptions, runbooks, the tests' series.
    for path in (dashboard, rules, ROOT / "ops/prometheus/alerts_test.yml"):
        for name in sorted(set(NAME.findall(path.read_text())) - set(families) - bases):
            problems.append(f"{path.name}: {name} is no metric payorch registers")
    for problem in sorted(set(problems)):
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(
        f"monitoring: {len(exprs)} queries and rules read only payorch's "
        f"{len(families)} series names and their labels"
    )


if __name__ == "__main__":
    main()
