"""hub.controllers.site.placements: the authorization decision, by table."""

from __future__ import annotations

import pytest

from hub.api import site as site_api
from hub.controllers.site import placements

P = site_api.Placement


def spec(*grants: tuple[list[str], list[str]], same: bool = True) -> site_api.SiteSpec:
    return site_api.SiteSpec(
        placements=[P(namespaces=ns, target_namespaces=targets) for ns, targets in grants],
        same_namespace=same,
    )


CASES = [
    ("no Site object: nothing", None, "team-a", "team-a", False),
    ("default: the same namespace", spec(), "team-a", "team-a", True),
    ("default: another namespace is refused", spec(), "team-a", "tenants", False),
    ("same-namespace rule switched off", spec(same=False), "team-a", "team-a", False),
    ("granted by a placement", spec((["team-a"], ["tenants"])), "team-a", "tenants", True),
    ("placement for another namespace", spec((["team-b"], ["tenants"])), "team-a", "tenants", False),
    ("placement for another target", spec((["team-a"], ["shared"])), "team-a", "tenants", False),
    (
        "namespace and target from two different grants do not combine",
        spec((["team-a"], ["a-only"]), (["team-b"], ["tenants"])),
        "team-a",
        "tenants",
        False,
    ),
    ("several namespaces and targets", spec((["x", "team-a"], ["y", "tenants"])), "team-a", "tenants", True),
    ("a name is no prefix match", spec((["team"], ["tenants"])), "team-a", "tenants", False),
    ("same-namespace off, placement still grants", spec((["a"], ["a"]), same=False), "a", "a", True),
]


@pytest.mark.parametrize(
    ("site", "namespace", "target", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_denial(site: site_api.SiteSpec | None, namespace: str, target: str, allowed: bool) -> None:
    why = placements.denial(site, site="site-a", namespace=namespace, target_namespace=target)
    assert (why == "") is allowed
    if not allowed:
        # The message names the site, the namespace and the target namespace.
        assert "site-a" in why and f"namespace {namespace}" in why and f"target namespace {target}" in why


def test_manifest_is_a_valid_site() -> None:
    m = site_api.manifest("site-a", placements=[P(namespaces=["default"], target_namespaces=["tenants"])])
    assert m == {
        "apiVersion": "kamaji-broker.io/v1alpha1",
        "kind": "Site",
        "metadata": {"name": "site-a"},
        "spec": {
            "placements": [{"namespaces": ["default"], "targetNamespaces": ["tenants"]}],
            "sameNamespace": True,
        },
    }
    assert site_api.Site.parse(m).spec.placements[0].target_namespaces == ["tenants"]
