#!/usr/bin/env python3
"""Checks that the Grafana dashboard and the Prometheus rules use only metrics
the daemon really exports.

  check_metrics.py --scrape FILE [--deploy DIR] [--promql-out FILE]

FILE is a /metrics scrape of a running fileserver (scripts/check-deploy.sh
takes one after sending some traffic). Exported names are read from its
`# TYPE` lines (a histogram `h` also exports h_bucket, h_sum and h_count).
Allowed in an expression: those names, the recording rules' own names, and
Prometheus' synthetic `up`.

Also checks the dashboard's structure (valid JSON, unique panel ids, every
target has an expr and a refId, the panels the operations guide promises are
there). With --promql-out it writes every dashboard expression, Grafana
variables substituted, as recording rules to FILE so the caller can parse them
with `promtool check rules` (Prometheus' own PromQL parser).
"""
import argparse
import json
import pathlib
import re
import sys

import yaml

KEYWORDS = {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
            "group_left", "group_right", "inf", "nan", "atan2", "start", "end"}
# Grafana variables -> something PromQL accepts.
GRAFANA_VARS = [("$__rate_interval", "1m"), ("$__interval", "1m"), ("$__range", "1h"),
                ("${job}", ".*"), ("$job", ".*"), ("${instance}", ".*"), ("$instance", ".*")]
REQUIRED_PANELS = {  # title -> metric that must appear in it (issue 6, item 4)
    "Request rate by status code": "fileserver_http_requests_total",
    "Latency quantiles": "fileserver_http_request_duration_seconds_bucket",
    "Cache hit ratio": "fileserver_cache_hits_total",
    "Contention by component": "fileserver_contention_total",
    "Open fds vs budget": "fileserver_fd_budget",
    "Deferred release queue depth": "fileserver_deferred_release_queue_depth",
}


def metric_names(expr):
    """Metric names referenced by a PromQL expression (a tokenizer, not a parser:
    the caller has promtool parse the same expressions)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)  # string literals
    s = re.sub(r"#.*", "", s)                                                    # comments
    s = re.sub(r"\{[^{}]*\}", " ", s)                                            # label matchers
    s = re.sub(r"\[[^\[\]]*\]", " ", s)                                          # ranges / subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", " ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)", s):
        name, rest = m.group(1), s[m.end():]
        if name.lower() in KEYWORDS or re.match(r"\s*\(", rest):
            continue  # keyword or function call
        names.add(name)
    return names


def exported(scrape_text):
    names = set()
    for line in scrape_text.splitlines():
        m = re.match(r"# TYPE (\S+) (\S+)", line)
        if m:
            name, kind = m.groups()
            names.add(name)
            if kind in ("histogram", "summary"):
                names.update({name + "_sum", name + "_count"})
            if kind == "histogram":
                names.add(name + "_bucket")
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scrape", required=True)
    ap.add_argument("--deploy", default="deploy")
    ap.add_argument("--promql-out")
    args = ap.parse_args()
    deploy = pathlib.Path(args.deploy)
    problems = []

    have = exported(pathlib.Path(args.scrape).read_text())
    if not any(n.startswith("fileserver_") for n in have):
        problems.append("the scrape has no fileserver_* metric at all")

    recorded, rule_exprs = set(), []
    for f in ("fileserver.rules.yml", "fileserver.alerts.yml"):
        for group in yaml.safe_load((deploy / "prometheus" / f).read_text())["groups"]:
            for rule in group["rules"]:
                if "record" in rule:
                    recorded.add(rule["record"])
                rule_exprs.append((f"{f}: {rule.get('record') or rule.get('alert')}", rule["expr"]))
    allowed = have | recorded | {"up"}

    dash_path = deploy / "grafana" / "fileserver.json"
    try:
        dash = json.loads(dash_path.read_text())
    except json.JSONDecodeError as e:
        print(f"{dash_path}: not valid JSON: {e}")
        return 1
    for key in ("uid", "title", "panels", "schemaVersion"):
        if key not in dash:
            problems.append(f"dashboard: missing {key!r}")
    ids, dash_exprs, titles = set(), [], {}
    for panel in dash.get("panels", []):
        pid = panel.get("id")
        if pid in ids:
            problems.append(f"dashboard: duplicate panel id {pid}")
        ids.add(pid)
        if panel.get("type") == "row":
            continue
        if "gridPos" not in panel:
            problems.append(f"dashboard: panel {pid} has no gridPos")
        targets = panel.get("targets", [])
        if not targets:
            problems.append(f"dashboard: panel {pid} ({panel.get('title')}) has no query")
        refs = [t.get("refId") for t in targets]
        if len(set(refs)) != len(refs) or None in refs:
            problems.append(f"dashboard: panel {pid} has missing or duplicate refIds")
        for t in targets:
            if not t.get("expr"):
                problems.append(f"dashboard: panel {pid} target {t.get('refId')} has no expr")
                continue
            dash_exprs.append((f"dashboard panel {pid} '{panel.get('title')}' {t.get('refId')}", t["expr"]))
            titles.setdefault(panel.get("title"), set()).update(metric_names(t["expr"]))
    for title, metric in REQUIRED_PANELS.items():
        if metric not in titles.get(title, set()):
            problems.append(f"dashboard: no panel {title!r} showing {metric}")

    for where, expr in dash_exprs + rule_exprs:
        for name in sorted(metric_names(expr) - allowed):
            problems.append(f"{where}: metric {name} is not exported by the daemon nor recorded by a rule")

    if args.promql_out:
        rules = []
        for i, (_, expr) in enumerate(dash_exprs):
            for var, value in GRAFANA_VARS:
                expr = expr.replace(var, value)
            rules.append({"record": f"dashboard:expr_{i}", "expr": expr})
        pathlib.Path(args.promql_out).write_text(
            yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, sort_keys=False))

    used = set().union(*(metric_names(e) for _, e in dash_exprs + rule_exprs))
    unused = sorted(n for n in have if n.startswith("fileserver_") and n not in used
                    and not n.endswith(("_sum", "_count")) and n + "_bucket" not in have)
    for p in problems:
        print(p)
    print(f"{len(dash_exprs)} dashboard and {len(rule_exprs)} rule expressions checked against "
          f"{len([n for n in have if n.startswith('fileserver_')])} exported names"
          + (f"; exported but not charted: {', '.join(unused)}" if unused else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
