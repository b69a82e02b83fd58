"""The ``<site>.site.yaml`` that ``kamaji-broker site add`` writes next to the site's credentials.

Owns turning the ``--namespaces``/``--target-namespaces`` flags into a ``Site`` placement and
writing the manifest (``hub.api.site.manifest``) with a comment that says what it grants. Talks
to the file it writes and, with ``--apply KUBECONFIG``, to that management cluster (create the
Site, or update its spec), through ``common.kube``.
"""

from __future__ import annotations

from pathlib import Path

import pydantic
import yaml

from common import kube as ckube
from common.kube import errors as kerrors
from common.kube import resources
from hub.api import site as site_api

SUFFIX = ".site.yaml"


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


def placements(namespaces: str | None, target_namespaces: str | None) -> list[site_api.Placement]:
    """One placement from the two comma-separated flags, or none; ValueError naming the flag."""
    ns, targets = _names(namespaces), _names(target_namespaces)
    if not ns and not targets:
        return []
    if not ns or not targets:
        missing = "--namespaces" if not ns else "--target-namespaces"
        raise ValueError(f"{missing} is needed too: a placement names both sides")
    try:
        return [site_api.Placement(namespaces=ns, target_namespaces=targets)]
    except pydantic.ValidationError as exc:
        bad = "; ".join(
            f"--{'namespaces' if e['loc'][0] == 'namespaces' else 'target-namespaces'}: {e['msg']}"
            for e in exc.errors()
        )
        raise ValueError(f"not a namespace name (DNS-1123 label): {bad}") from None


def write(
    directory: Path, site: str, *, placements: list[site_api.Placement], bootstrap_jwt: str = ""
) -> Path:
    """Write ``directory/<site>.site.yaml`` (naming the bootstrap credential written with it,
    operator mode: the one credential older than the Site the hub takes); its path."""
    path = directory / f"{site}{SUFFIX}"
    granted = (
        "; ".join(
            f"namespaces {', '.join(p.namespaces)} -> target namespaces {', '.join(p.target_namespaces)}"
            for p in placements
        )
        or "no explicit placement"
    )
    header = (
        f"# The Site {site} for the management cluster: kubectl apply -f {path.name}\n"
        f"# Grants: {granted}; and (spec.sameNamespace) an RKCP may target the site namespace\n"
        "# named like its own. Without this object no control plane is placed at the site.\n"
    )
    manifest = site_api.manifest(site, placements=placements, bootstrap_jwt=bootstrap_jwt)
    body = yaml.safe_dump(manifest, sort_keys=False)
    path.write_text(header + body)
    return path


def remove(directory: Path, site: str) -> None:
    """Delete ``directory/<site>.site.yaml`` if it is there (``site remove``)."""
    (directory / f"{site}{SUFFIX}").unlink(missing_ok=True)


async def apply(
    kubeconfig: Path, site: str, *, placements: list[site_api.Placement], bootstrap_jwt: str = ""
) -> str:
    """Create the Site, or replace the spec of the existing one; "created" or "updated". (An
    existing Site is older than the bootstrap credential: it needs no annotation naming it.)"""
    body = site_api.manifest(site, placements=placements, bootstrap_jwt=bootstrap_jwt)
    api = await ckube.api_client_from_kubeconfig(str(kubeconfig))
    try:
        kube = ckube.Kube(api)
        try:
            await kube.create(resources.SITE, body)
        except kerrors.Conflict:
            await kube.patch(resources.SITE, site, {"spec": body["spec"]})
            return "updated"
        return "created"
    finally:
        await api.close()


async def delete(kubeconfig: Path, site: str) -> str:
    """Delete the Site: "deleted", or "not found" when there was none."""
    api = await ckube.api_client_from_kubeconfig(str(kubeconfig))
    try:
        try:
            await ckube.Kube(api).delete(resources.SITE, site)
        except kerrors.NotFound:
            return "not found"
        return "deleted"
    finally:
        await api.close()
