"""deploy/monitoring: every query of the Grafana dashboard and every alert reads only metric names
the hub and the agent export, and parses as PromQL; the dashboard, the PrometheusRule and the
kustomization have the shapes Grafana and the Prometheus Operator load."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import promql_parser
import pytest
import yaml

from agent import metrics as agent_metrics
from hub import metrics as hub_metrics
from tests.deploy import manifests as m
from tests.deploy import promql

MONITORING = m.DEPLOY / "monitoring"
DASHBOARD = json.loads((MONITORING / "grafana-dashboard.json").read_text())
RULE = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
EXPORTED = promql.exposed_names(hub_metrics.Metrics().registry) | promql.exposed_names(
    agent_metrics.Metrics().registry
)


def panels() -> Iterator[dict[str, Any]]:
    for panel in DASHBOARD["panels"]:
        yield panel
        yield from panel.get("panels", [])


def dashboard_queries() -> Iterator[tuple[str, str]]:
    for panel in panels():
        for t in panel.get("targets", []):
            yield f"panel {panel['id']} {panel['title']!r} {t['refId']}", t["expr"]
    for var in DASHBOARD["templating"]["list"]:
        if var["type"] == "query":
            yield f"variable {var['name']}", var["query"]["query"]


def rule_queries() -> Iterator[tuple[str, str]]:
    for group in RULE["spec"]["groups"]:
        for rule in group["rules"]:
            yield f"alert {rule['alert']}", rule["expr"]


QUERIES = [*dashboard_queries(), *rule_queries()]


# -- the extractor ------------------------------------------------------------------------------

CASES = [
    ("kb_a", {"kb_a"}),
    ('rate(kb_a_total{site=~"$site"}[$__rate_interval])', {"kb_a_total"}),
    ("histogram_quantile(0.99, sum by (le, site) (rate(kb_h_bucket[5m])))", {"kb_h_bucket"}),
    ("sum(rate(kb_h_bucket[5m])) by (le)", {"kb_h_bucket"}),
    ('max by (site) (kb_x * on (instance) group_left (site) kb_info{site=~"$site"})', {"kb_x", "kb_info"}),
    ("kb_x * on(instance) group_left kb_info", {"kb_x", "kb_info"}),
    ("sum without (instance, job) (kb_a) / ignoring (op) group_right kb_b", {"kb_a", "kb_b"}),
    ("kb_a offset 5m > bool 0.5", {"kb_a"}),
    ("kb_a > 1e3 and kb_b < Inf or vector(0) unless kb_c", {"kb_a", "kb_b", "kb_c"}),
    ('label_replace(kb_a, "dst", "kb_not_a_metric", "src", "(.*)")', {"kb_a"}),
    ('kb_a{stream=~".+_SITE_${site}", x="}{kb_no"}', {"kb_a"}),
    ('{__name__="kb_by_name", site="a"}', {"kb_by_name"}),
    ("max_over_time(kb_a[1h:5m]) - kb_b @ start()", {"kb_a", "kb_b"}),
    ("absent(kb_hub_up)", {"kb_hub_up"}),
    ('kb_a{site=~"[[site]]"} + on (site) kb_b{site=~"${site}"}', {"kb_a", "kb_b"}),
    ("deriv(kb_a[15m]) > 0 and kb_a > 20", {"kb_a"}),
    ("label_values(kb_hub_site_connected, site)", {"kb_hub_site_connected"}),
    ("label_values(site)", set()),
]


@pytest.mark.parametrize(("expr", "names"), CASES, ids=[c[0] for c in CASES])
def test_metric_names(expr: str, names: set[str]) -> None:
    assert promql.metric_names(expr) == names


@pytest.mark.parametrize(
    ("expr", "unknown"),
    [
        pytest.param("sum(kb_hub_site_backlog)", set(), id="exported-gauge"),
        pytest.param("rate(kb_hub_no_such_thing_total[5m])", {"kb_hub_no_such_thing_total"}, id="unknown"),
        pytest.param("rate(kb_hub_intents_published[5m])", {"kb_hub_intents_published"},
                     id="counter-without-total"),
        pytest.param("kb_hub_first_ready_seconds > 1", {"kb_hub_first_ready_seconds"},
                     id="histogram-bare-name"),
        pytest.param("sum(rate(kb_hub_first_ready_seconds_bucket[5m])) by (le)", set(),
                     id="histogram-bucket"),
        pytest.param("kb_agent_consumer_pending + kb_agent_typo", {"kb_agent_typo"}, id="agent"),
    ],
)  # fmt: skip
def test_the_check_fails_on_a_name_nothing_exports(expr: str, unknown: set[str]) -> None:
    assert promql.unknown_names(expr, EXPORTED) == unknown


def test_exposed_names_are_what_a_scrape_shows() -> None:
    names = promql.exposed_names(hub_metrics.Metrics().registry)
    assert {"kb_hub_intents_published_total", "kb_hub_first_ready_seconds_bucket",
            "kb_hub_first_ready_seconds_count", "kb_hub_site_backlog"} <= names  # fmt: skip
    assert not {"kb_hub_intents_published", "kb_hub_first_ready_seconds"} & names


# -- every query ------------------------------------------------------------------------------


@pytest.mark.parametrize(("where", "expr"), QUERIES, ids=[q[0] for q in QUERIES])
def test_every_query_reads_exported_metrics_only(where: str, expr: str) -> None:
    assert promql.metric_names(expr), f"{where} reads no metric"
    assert promql.unknown_names(expr, EXPORTED) == set(), where


def _substituted(expr: str) -> str:
    """``expr`` as Grafana sends it: its variables replaced by values of their kind."""
    expr = re.sub(r"\$__(?:rate_interval|interval|range)\b", "5m", expr)
    return re.sub(r"\$\{?\w+\}?|\[\[\w+\]\]", ".*", expr)


def _parsed_names(expr: str) -> set[str]:
    found: set[str] = set()

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            by_matcher = [x.value for x in node.matchers.matchers if x.name == "__name__"]
            found.update([node.name] if node.name else by_matcher)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found


@pytest.mark.parametrize(
    ("where", "expr"), [q for q in QUERIES if not q[0].startswith("variable")], ids=lambda v: str(v)[:60]
)
def test_every_query_parses_and_the_parser_finds_the_same_names(where: str, expr: str) -> None:
    assert _parsed_names(_substituted(expr)) == promql.metric_names(expr), where


@pytest.mark.parametrize(("expr", "names"), [c for c in CASES if not c[0].startswith("label_values")])
def test_the_extractor_agrees_with_the_parser(expr: str, names: set[str]) -> None:
    assert _parsed_names(_substituted(expr)) == names


# -- the dashboard --------------------------------------------------------------------------------


def test_dashboard_shape() -> None:
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    rows = [p["title"] for p in panels() if p["type"] == "row"]
    assert rows == ["Fleet", "Sites", "Latency", "Errors"]
    for panel in panels():
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]
        for t in panel["targets"]:
            assert t["datasource"] == DATASOURCE and t["expr"].strip(), panel["title"]


def test_dashboard_variables() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    datasource = variables["datasource"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")
    site = variables["site"]
    assert site["datasource"] == DATASOURCE and site["multi"] and site["includeAll"]
    assert promql.metric_names(site["query"]["query"]) == {"kb_hub_site_connected"}
    # Every query about sites follows the variable.
    exprs = [t["expr"] for p in panels() for t in p.get("targets", [])]
    per_site = [expr for expr in exprs if "site" in expr]
    assert all("$site" in expr for expr in per_site)


def test_dashboard_shows_both_latencies_as_quantiles_and_heatmaps() -> None:
    exprs: dict[str, list[str]] = {}
    for p in panels():
        exprs.setdefault(p["type"], []).extend(t["expr"] for t in p.get("targets", []))
    for histogram in ("kb_hub_first_ready_seconds_bucket", "kb_hub_update_ready_seconds_bucket"):
        quantiles = [e for e in exprs["timeseries"] if histogram in e and "histogram_quantile" in e]
        found = re.findall(r"histogram_quantile\((0\.\d+)", " ".join(quantiles))
        assert sorted(found) == ["0.5", "0.9", "0.99"], histogram
        assert any(histogram in e for e in exprs["heatmap"]), histogram


# -- the PrometheusRule -----------------------------------------------------------------------

RULE_KEYS = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}


def test_prometheus_rule_shape() -> None:
    assert (RULE["apiVersion"], RULE["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert RULE["metadata"]["name"] == "kamaji-broker"
    groups = RULE["spec"]["groups"]
    assert len({g["name"] for g in groups}) == len(groups)
    alerts = [r for g in groups for r in g["rules"]]
    assert len({r["alert"] for r in alerts}) == len(alerts)
    for r in alerts:
        assert set(r) <= RULE_KEYS and {"alert", "expr", "labels", "annotations"} <= set(r), r["alert"]
        assert re.fullmatch(r"KamajiBroker[A-Z][A-Za-z]+", r["alert"])
        assert "for" not in r or re.fullmatch(r"\d+[smh]", r["for"]), r["alert"]
        assert r["labels"]["severity"] in ("critical", "warning", "info"), r["alert"]
        assert {"summary", "description"} <= set(r["annotations"]), r["alert"]
        description = r["annotations"]["description"]
        assert "kamaji-broker " in description or "kubectl " in description, f"{r['alert']}: what to run"
        # A label the annotations show must survive the expression's aggregation.
        shown = set(re.findall(r"\$labels\.(\w+)", json.dumps(r["annotations"])))
        kept = set(re.findall(r"\b(?:by|on) \(([^)]*)\)", r["expr"]))
        assert shown <= {label.strip() for labels in kept for label in labels.split(",")}, r["alert"]


@pytest.mark.parametrize(
    ("alert", "reads", "for_"),
    [
        ("KamajiBrokerSiteDisconnected", "kb_hub_site_connected", "5m"),
        ("KamajiBrokerSiteBacklogGrowing", "kb_hub_site_backlog", "15m"),
        ("KamajiBrokerFirstReadySlow", "kb_hub_first_ready_seconds_bucket", "15m"),
        ("KamajiBrokerSecretsNotSynced", "kb_hub_secrets_not_synced", "10m"),
        ("KamajiBrokerReconcileErrors", "kb_hub_reconcile_errors_total", "15m"),
    ],
)
def test_the_alerts_the_issue_asks_for(alert: str, reads: str, for_: str) -> None:
    [rule] = [r for g in RULE["spec"]["groups"] for r in g["rules"] if r["alert"] == alert]
    assert reads in promql.metric_names(rule["expr"]) and rule["for"] == for_
    if alert == "KamajiBrokerSiteBacklogGrowing":
        assert "deriv(kb_hub_site_backlog[15m])" in rule["expr"]
    if alert == "KamajiBrokerFirstReadySlow":
        assert rule["expr"].startswith("histogram_quantile(0.99,") and rule["expr"].endswith("> 300")


# -- the kustomization ------------------------------------------------------------------------


def test_kustomization_builds_the_rule_the_scrape_and_the_dashboard_configmap() -> None:
    docs = m.kustomize(MONITORING)
    assert sorted(d["kind"] for d in docs) == ["ConfigMap", "PrometheusRule", "ServiceMonitor"]
    cm = m.one(docs, "ConfigMap")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["kamaji-broker.json"]) == DASHBOARD
    m.validate(cm)
    assert m.one(docs, "PrometheusRule")["spec"] == RULE["spec"]
    # The ServiceMonitor selects the hub's metrics Service, on a port it has.
    service = yaml.safe_load((m.DEPLOY / "hub" / "service.yaml").read_text())
    monitor = m.one(docs, "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert all(e["path"] == "/metrics" for e in monitor["spec"]["endpoints"])
