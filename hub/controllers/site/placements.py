"""Placement authorization: may an RKCP in this namespace place its control plane there?

Owns the decision, pure and total: given the ``Site`` spec (None when no ``Site`` object
exists) and the RKCP's namespace and target namespace at the site, ``denial`` returns "" when
the placement is granted and otherwise the ``NotAuthorized`` message, naming the site, the
namespace and the target namespace (never anything secret). The RKCP controller asks it on
every reconcile; an RKCP it refuses gets ``Ready=False/NotAuthorized`` and no intent.

The rule: a site without a ``Site`` object accepts nothing; otherwise a placement is
granted when the target namespace equals the RKCP's own namespace (``spec.sameNamespace``,
default true) or when one entry of ``spec.placements`` names both namespaces.
"""

from __future__ import annotations

from hub.api import site as site_api

NOT_AUTHORIZED = "NotAuthorized"


def granted(spec: site_api.SiteSpec, *, namespace: str, target_namespace: str) -> bool:
    if spec.same_namespace and namespace == target_namespace:
        return True
    return any(namespace in p.namespaces and target_namespace in p.target_namespaces for p in spec.placements)


def denial(spec: site_api.SiteSpec | None, *, site: str, namespace: str, target_namespace: str) -> str:
    """ "" when an RKCP of ``namespace`` may target ``target_namespace`` at ``site``; else why not."""
    if spec is None:
        return (
            f"site {site} has no Site object in the management cluster: namespace {namespace} may not "
            f"place control planes in target namespace {target_namespace} there "
            f"(create the Site; `kamaji-broker site add` writes its manifest)"
        )
    if granted(spec, namespace=namespace, target_namespace=target_namespace):
        return ""
    return (
        f"Site {site} does not grant namespace {namespace} the target namespace {target_namespace} "
        f"(add both to one entry of its spec.placements)"
    )
