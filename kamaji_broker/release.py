"""The release as a Cluster API provider: the files clusterctl and the CAPI Operator fetch.

``python -m kamaji_broker.release`` (``make release-manifests``) writes, in clusterctl's local
repository layout ``<out>/control-plane-kamaji-broker/v<version>/`` (the same files are the
assets of a GitHub release):

- ``metadata.yaml``: the release series and the CAPI contract each implements;
- ``control-plane-components.yaml``: ``deploy/hub`` with its CRDs (built by
  ``kamaji_broker.kustomizing``), every object labelled ``cluster.x-k8s.io/provider:
  control-plane-kamaji-broker``, and what the operator decides as clusterctl variables
  (``VARIABLES``; the defaults are the base's values);
- ``deploy/templates``' cluster templates and ClusterClass, when that directory exists;

and ``<out>/capi-operator/kamaji-broker-v<version>.yaml``, the ConfigMap the Cluster API
Operator reads a provider from (``fetchConfig.selector``). Reads ``deploy/``, writes ``<out>``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kamaji_broker import __version__, kustomizing

NAME = "kamaji-broker"
"""The provider's name in clusterctl.yaml (``clusterctl init --control-plane kamaji-broker``)."""
MANIFEST_LABEL = "control-plane-kamaji-broker"
"""``<type>-<name>``: the value of the provider label and the directory of a local repository."""
PROVIDER_LABEL = "cluster.x-k8s.io/provider"
CONTRACT = "v1beta2"
"""The Cluster API contract this release series implements (metadata.yaml): the RKCP's status
carries v1beta2's fields (``initialization``, the ``Available`` condition and the replica
counters) beside v1beta1's, so clusterctl of Cluster API v1.11 and newer installs it; its CRDs
carry both contract labels, so Cluster API's controllers resolve them either way."""
COMPONENTS = "control-plane-components.yaml"
METADATA = "metadata.yaml"
CONTAINER = "manager"
"""The controller's container, as clusterctl's provider contract names it."""
TEMPLATE_PREFIXES = ("cluster-template", "clusterclass-")


@dataclass(frozen=True)
class Variable:
    name: str
    meaning: str


VARIABLES = (
    Variable("KAMAJI_BROKER_NATS_URL", "NATS client URL(s), comma separated (required); the server's "
             "certificate must name the host"),
    Variable("KAMAJI_BROKER_IMAGE", "the hub's image"),
    Variable("KAMAJI_BROKER_STREAM_REPLICAS", "JetStream replicas of the streams: 3 in a NATS cluster, 1 "
             "with one server"),
    Variable("KAMAJI_BROKER_LOG_LEVEL", "debug, info, warning or error"),
)  # fmt: skip
"""The components file's variables, for the docs and ``clusterctl init`` users."""


def metadata(version: str) -> dict[str, Any]:
    major, minor = (int(p) for p in version.lstrip("v").split(".")[:2])
    return {
        "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3",
        "kind": "Metadata",
        "releaseSeries": [{"major": major, "minor": minor, "contract": CONTRACT}],
    }


def components(deploy: Path) -> list[dict[str, Any]]:
    """deploy/hub built, labelled for clusterctl, its Deployment parameterized by ``VARIABLES``."""
    docs = kustomizing.build(deploy / "hub")
    for doc in docs:
        doc["metadata"].setdefault("labels", {})[PROVIDER_LABEL] = MANIFEST_LABEL
    deployments = [d for d in docs if d["kind"] == "Deployment"]
    if len(deployments) != 1:
        raise ValueError(f"deploy/hub: expected one Deployment, found {len(deployments)}")
    _parameterize(deployments[0])
    return docs


def canonical_image(reference: str) -> str:
    """``reference`` with its registry and path written out, as Docker reads a short one:
    ``kamaji-broker:0.1.0`` is ``docker.io/library/kamaji-broker:0.1.0``. clusterctl refuses
    components whose image it cannot parse as canonical ("repository name must be canonical")
    before it applies anything; the same image runs either way."""
    first, slash, _ = reference.partition("/")
    if not slash:
        return f"docker.io/library/{reference}"
    if "." in first or ":" in first or first == "localhost":
        return reference
    return f"docker.io/{reference}"


def _parameterize(deployment: dict[str, Any]) -> None:
    pod = deployment["spec"]["template"]["spec"]
    found = [c for c in pod["containers"] if c["name"] == CONTAINER]
    if not found:
        raise ValueError(f"deploy/hub: the Deployment has no container named {CONTAINER!r}")
    c = found[0]
    c["image"] = f"${{KAMAJI_BROKER_IMAGE:={canonical_image(c['image'])}}}"
    replicas = _arg(c["args"], "--stream-replicas")
    args = [a for a in c["args"] if not a.startswith("--stream-replicas=")]
    # No variable for --namespace or --watch-filter: their default is empty, and clusterctl
    # requires a variable whose default is empty (`${X:=}`) as if it had none.
    c["args"] = [*args, f"--stream-replicas=${{KAMAJI_BROKER_STREAM_REPLICAS:={replicas}}}"]
    env = {e["name"]: e for e in c["env"]}
    env["KB_HUB_NATS_URL"]["value"] = "${KAMAJI_BROKER_NATS_URL}"
    env["KB_LOG_LEVEL"]["value"] = f"${{KAMAJI_BROKER_LOG_LEVEL:={env['KB_LOG_LEVEL']['value']}}}"


def _arg(args: list[str], flag: str) -> str:
    values = [a.split("=", 1)[1] for a in args if a.startswith(flag + "=")]
    if len(values) != 1:
        raise ValueError(f"deploy/hub: the manager's args hold {flag}=... {len(values)} times, not once")
    return values[0]


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the operator ConfigMap's files) as literal blocks, readable in review."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(docs: Sequence[dict[str, Any]], *, header: str = "") -> str:
    # No line folding: a ${VARIABLE} split over two lines would be two halves to clusterctl.
    body = yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=1 << 16, explicit_start=True)
    return header + body


def operator_configmap(version: str, *, metadata_text: str, components_text: str) -> dict[str, Any]:
    """The ConfigMap the CAPI Operator fetches a provider version from (``fetchConfig.selector``)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{NAME}-{version}",
            "labels": {
                "provider.cluster.x-k8s.io/name": NAME,
                "provider.cluster.x-k8s.io/type": "control-plane",
                "provider.cluster.x-k8s.io/version": version,
            },
        },
        "data": {"metadata": metadata_text, "components": components_text},
    }


def write(out: Path, *, deploy: Path, version: str) -> list[Path]:
    """Every release file under ``out``; the paths written."""
    tag = "v" + version.lstrip("v")
    repo = out / MANIFEST_LABEL / tag
    repo.mkdir(parents=True, exist_ok=True)
    header = f"# kamaji-broker {tag}: generated by `make release-manifests` from deploy/; do not edit.\n"
    metadata_text = dump([metadata(tag)], header=header)
    components_text = dump(components(deploy), header=header)
    written = [repo / METADATA, repo / COMPONENTS]
    written[0].write_text(metadata_text)
    written[1].write_text(components_text)
    templates = deploy / "templates"
    for template in sorted(templates.glob("*.yaml")) if templates.is_dir() else ():
        if template.name.startswith(TEMPLATE_PREFIXES):
            written.append(Path(shutil.copyfile(template, repo / template.name)))
    cm = operator_configmap(tag, metadata_text=metadata_text, components_text=components_text)
    operator = out / "capi-operator" / f"{NAME}-{tag}.yaml"
    operator.parent.mkdir(parents=True, exist_ok=True)
    operator.write_text(dump([cm], header=header))
    return [*written, operator]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m kamaji_broker.release", description=__doc__.splitlines()[0])
    p.add_argument("--deploy", type=Path, default=Path("deploy"), help="the deploy/ directory to build from")
    p.add_argument(
        "--out", type=Path, default=Path("out/release"), help="where to write (default out/release)"
    )
    p.add_argument("--version", default=__version__, help=f"the release's version (default {__version__})")
    args = p.parse_args(argv)
    try:
        paths = write(args.out, deploy=args.deploy, version=args.version)
    except (ValueError, OSError) as exc:
        print(f"release: error: {exc}", file=sys.stderr)
        return 1
    for path in paths:
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
