"""hub.metrics: the per-site helpers, and a leader's gauges emptied when its term ends."""

from __future__ import annotations

import pytest

from hub import metrics as hub_metrics

PER_SITE = ("kb_hub_site_backlog", "kb_hub_site_connected", "kb_hub_site_heartbeat_age_seconds")


def value(m: hub_metrics.Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


@pytest.mark.parametrize(
    ("connected", "age", "expected_connected", "expected_age"),
    [
        pytest.param(True, 4.0, 1.0, 4.0, id="fresh"),
        pytest.param(False, 95.0, 0.0, 95.0, id="stale"),
        pytest.param(False, None, 0.0, None, id="never-heard-no-age"),
        pytest.param(True, -2.0, 1.0, 0.0, id="clock-skew-never-negative"),
    ],
)
def test_site_seen(
    connected: bool, age: float | None, expected_connected: float, expected_age: float | None
) -> None:
    m = hub_metrics.Metrics()
    m.site_seen("site-a", connected=connected, heartbeat_age=age)
    assert value(m, "kb_hub_site_connected", site="site-a") == expected_connected
    assert value(m, "kb_hub_site_heartbeat_age_seconds", site="site-a") == expected_age


def test_forget_site_removes_only_that_sites_series() -> None:
    m = hub_metrics.Metrics()
    for site in ("site-a", "site-b"):
        m.site_backlog.labels(site=site).set(3)
        m.site_seen(site, connected=True, heartbeat_age=1.0)
    m.forget_site("site-a")
    m.forget_site("site-never-seen")  # no error for a site without series
    for name in PER_SITE:
        assert value(m, name, site="site-a") is None, name
        assert value(m, name, site="site-b") is not None, name


def test_a_term_that_ends_leaves_no_leader_gauge_but_keeps_counters() -> None:
    m = hub_metrics.Metrics()
    m.site_backlog.labels(site="site-a").set(3)
    m.site_seen("site-a", connected=True, heartbeat_age=1.0)
    m.sites_connected.set(1)
    m.control_planes.labels("site-a", "Ready").set(5)
    m.secrets_not_synced.labels("site-a").set(1)
    m.intents_published.labels(site="site-a", op="provision").inc()
    m.clear_leader_gauges()
    for name in (*PER_SITE, "kb_hub_secrets_not_synced"):
        assert value(m, name, site="site-a") is None, name
    assert value(m, "kb_hub_control_planes", site="site-a", phase="Ready") is None
    assert value(m, "kb_hub_sites_connected") == 0.0
    assert value(m, "kb_hub_intents_published_total", site="site-a", op="provision") == 1.0
