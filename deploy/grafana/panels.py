"""Small builders for Grafana dashboard JSON (schema 39, Grafana 10/11), so that
dashboards.py reads as a list of panels and their PromQL.

Every panel queries the data source chosen in the dashboard's `datasource` variable. Panels
are laid out left to right in rows of 24 grid units; `width` and `height` are grid units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass
class Panel:
    title: str
    queries: list[Query]
    kind: str = "timeseries"  # timeseries, stat or table
    unit: str = "short"
    width: int = 8
    height: int = 8
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def timeseries(title: str, *queries: Query, unit: str = "short", **kw: Any) -> Panel:
    return Panel(title, list(queries), "timeseries", unit, **kw)


def stat(title: str, expr: str, unit: str = "short", **kw: Any) -> Panel:
    kw.setdefault("width", 4)
    kw.setdefault("height", 4)
    return Panel(title, [Query(expr, instant=True)], "stat", unit, **kw)


def table(title: str, *queries: Query, **kw: Any) -> Panel:
    return Panel(title, [Query(q.expr, q.legend, True) for q in queries], "table", **kw)


def q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


def topic_variable(metric: str) -> dict[str, Any]:
    """A multi-value `topic` variable listing the topics that `metric` has series for."""
    return label_variable("topic", "Topic", metric)


def label_variable(label: str, title: str, metric: str) -> dict[str, Any]:
    """A multi-value variable `label` listing the values of that label in `metric`'s series
    (not the empty one)."""
    query = f"label_values({metric}, {label})"
    return {
        "name": label,
        "label": title,
        "type": "query",
        "datasource": DATASOURCE,
        "query": {"query": query, "refId": label},
        "definition": query,
        "regex": "/.+/",  # e.g. the all-topics aggregate has topic=""
        "multi": True,
        "includeAll": True,
        "allValue": ".+",
        "current": {"text": "All", "value": "$__all"},
        "refresh": 2,
        "sort": 1,
    }


def dashboard(
    uid: str, title: str, description: str, panels: list[Panel], variables: list[dict[str, Any]]
) -> dict[str, Any]:
    datasource_variable = {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0,
    }
    return {
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["strom"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": [datasource_variable, *variables]},
        "annotations": {"list": []},
        "panels": _layout(panels),
    }


def _layout(panels: list[Panel]) -> list[dict[str, Any]]:
    out = []
    x = y = row_height = 0
    for number, panel in enumerate(panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        out.append(_panel_json(number, panel, x, y))
        x += panel.width
        row_height = max(row_height, panel.height)
    return out


def _panel_json(number: int, panel: Panel, x: int, y: int) -> dict[str, Any]:
    targets = []
    for i, query in enumerate(panel.queries):
        target: dict[str, Any] = {
            "datasource": DATASOURCE,
            "expr": query.expr,
            "refId": chr(ord("A") + i),
            "instant": query.instant,
            "range": not query.instant,
        }
        if query.legend:
            target["legendFormat"] = query.legend
        if panel.kind == "table":
            target["format"] = "table"
        targets.append(target)
    return {
        "id": number,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": panel.width, "h": panel.height},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "options": panel.options,
        "targets": targets,
    }
