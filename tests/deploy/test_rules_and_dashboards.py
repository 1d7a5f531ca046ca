"""The alert rules and dashboards without a cluster: promtool checks and unit-tests the
rules, every dashboard expression parses as PromQL, and the committed dashboard JSON is
what deploy/grafana/dashboards.py generates. (test_live_monitoring.py checks the names
they reference against a live cluster.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from tests.deploy.deploy_files import (
    DASHBOARDS,
    DEPLOY,
    RULES,
    dashboard_expressions,
    metric_names,
    recording_rules,
    rule_expressions,
    tool,
)


def promtool(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("promtool"), *args], capture_output=True, text=True, timeout=60, cwd=cwd
    )


def test_rules_pass_promtool_check():
    result = promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    count = len(rule_expressions()) + len(recording_rules())
    assert f"SUCCESS: {count} rules found" in result.stdout


def test_rules_pass_their_unit_tests():
    result = promtool("test", "rules", "strom-rules.test.yml", cwd=str(RULES.parent))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_alerts_the_issue_asks_for_exist():
    assert set(rule_expressions()) == {
        "StromUnderReplicatedPartitions",
        "StromUnderMinIsrPartitions",
        "StromOfflinePartitions",
        "StromAbnormalControllerState",
        "StromNoRaftLeader",
        "StromRaftEpochChurn",
        "StromScrapeDown",
        "StromConsumerGroupLagTooLarge",
        "StromAuthenticationFailures",
        "StromAuthorizerDenials",
    }
    # Kafka Exporter's lag, from the offsets the nodes report.
    assert set(recording_rules()) == {"kafka_consumergroup_lag"}


def test_the_local_scrape_config_is_valid():
    result = promtool("check", "config", str(DEPLOY / "prometheus" / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def _as_rule_file(expressions: dict[str, str]) -> str:
    # promtool parses a rule's expression with Prometheus' own parser: each dashboard query
    # becomes a recording rule of a throwaway file.
    lines = ["groups:", "  - name: dashboards", "    rules:"]
    for i, expr in enumerate(expressions.values()):
        lines += [f"      - record: dashboard:expr{i}", f"        expr: {json.dumps(expr)}"]
    return "\n".join(lines) + "\n"


def test_every_dashboard_expression_parses(tmp_path):
    expressions = dashboard_expressions()
    assert len(expressions) > 40
    path = tmp_path / "dashboards.rules.yml"
    path.write_text(_as_rule_file(expressions))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(expressions)} rules found" in result.stdout


def test_a_broken_expression_is_caught(tmp_path):
    # The check above can fail: promtool rejects a malformed query.
    path = tmp_path / "broken.rules.yml"
    path.write_text(_as_rule_file({"x": "sum by (instance (rate(foo_total[1m]))"}))
    assert promtool("check", "rules", str(path)).returncode != 0


def test_metric_names_are_found_in_expressions():
    expr = (
        'sum by (instance, le) (rate(a_total{job=~"x.*", topic=""}[5m])) '
        "/ on (instance) group_left b_bytes or vector(0) and c offset 5m"
    )
    assert metric_names(expr) == {"a_total", "b_bytes", "c"}


def test_committed_dashboards_are_generated_from_the_code():
    spec = importlib.util.spec_from_file_location(
        "strom_dashboards", DEPLOY / "grafana" / "dashboards.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    rendered = module.render()
    committed = {p.name: p.read_text() for p in DASHBOARDS.glob("*.json")}
    assert set(rendered) == set(committed), "run: python deploy/grafana/dashboards.py"
    for name, text in rendered.items():
        assert committed[name] == text, f"{name} is stale: run python deploy/grafana/dashboards.py"


@pytest.mark.parametrize(
    "name", ["strom-cluster", "strom-kraft", "strom-topics", "strom-consumer-groups"]
)
def test_dashboards_have_unique_panel_ids_and_a_datasource_variable(name):
    board = json.loads((DASHBOARDS / f"{name}.json").read_text())
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert board["templating"]["list"][0]["name"] == "datasource"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in board["panels"])
