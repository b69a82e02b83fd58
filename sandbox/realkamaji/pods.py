"""What a Kamaji control plane's kube-apiserver container runs, as a process here: pure, tested
by tables.

Kamaji makes a Deployment per TenantControlPlane whose Pod has a ``kube-apiserver`` container:
its command and flags, and volumes (Secrets, projected Secrets, ConfigMaps) mounted where the
flags point. kwok makes that Pod Running without running anything; this reads the container
and lays out what a kubelet would: every mounted file under a directory of ours, the flags'
paths moved there, and the server bound to the address Kamaji advertises (the Service's cluster
IP). ``fingerprint`` changes exactly when what would run changes (Kamaji rotated a certificate,
changed a flag), so the process is started again then and only then.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

__all__ = ["CONTAINER", "Launch", "MissingSource", "launch"]

CONTAINER = "kube-apiserver"


class MissingSource(LookupError):
    """A Secret or ConfigMap the Pod mounts is not there (yet): the message names it."""


@dataclass(frozen=True)
class Launch:
    args: tuple[str, ...]
    """The container's command and flags, paths moved under the directory given to ``launch``."""
    files: Mapping[str, bytes]
    """Relative path under that directory → content."""
    address: str
    """Where it serves (``--advertise-address``)."""
    port: int

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256(json.dumps(self.args).encode())
        for path in sorted(self.files):
            digest.update(path.encode() + b"\0" + self.files[path] + b"\0")
        return digest.hexdigest()[:16]


def _decoded(data: Mapping[str, str], *, binary: bool) -> dict[str, bytes]:
    if binary:
        return {k: base64.b64decode(v) for k, v in data.items()}
    return {k: v.encode() for k, v in data.items()}


def _source_files(
    kind: str,
    ref: Mapping[str, Any],
    secrets: Mapping[str, Mapping[str, str]],
    maps: Mapping[str, Mapping[str, str]],
) -> dict[str, bytes]:
    name = str(ref.get("secretName") or ref.get("name") or "")
    store = secrets if kind == "secret" else maps
    if name not in store:
        if ref.get("optional"):
            return {}
        raise MissingSource(f"{kind} {name!r}")
    data = _decoded(store[name], binary=kind == "secret")
    items = ref.get("items")
    if not items:
        return data
    out = {}
    for item in items:
        key = str(item["key"])
        if key not in data:
            raise MissingSource(f"key {key!r} of {kind} {name!r}")
        out[str(item["path"])] = data[key]
    return out


def _volume_files(
    volume: Mapping[str, Any], secrets: Mapping[str, Mapping[str, str]], maps: Mapping[str, Mapping[str, str]]
) -> dict[str, bytes]:
    if "secret" in volume:
        return _source_files("secret", volume["secret"], secrets, maps)
    if "configMap" in volume:
        return _source_files("configMap", volume["configMap"], secrets, maps)
    out: dict[str, bytes] = {}
    for source in (volume.get("projected") or {}).get("sources") or []:
        for kind in ("secret", "configMap"):
            if kind in source:
                out.update(_source_files(kind, source[kind], secrets, maps))
    return out


def _flag(args: list[str], name: str) -> str | None:
    prefix = f"--{name}="
    return next((a[len(prefix) :] for a in args if a.startswith(prefix)), None)


def launch(
    deployment: Mapping[str, Any],
    *,
    secrets: Mapping[str, Mapping[str, str]],
    config_maps: Mapping[str, Mapping[str, str]],
    root: str,
) -> Launch:
    """The kube-apiserver of ``deployment`` as a process with its files under ``root``;
    ``MissingSource`` when a Secret or ConfigMap it mounts is not there, ``ValueError`` when the
    Pod has no such container or its flags say no address."""
    spec = deployment["spec"]["template"]["spec"]
    container = next((c for c in spec.get("containers") or [] if c.get("name") == CONTAINER), None)
    if container is None:
        raise ValueError(f"Deployment {deployment['metadata'].get('name')!r} has no {CONTAINER} container")
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    files: dict[str, bytes] = {}
    moved: list[tuple[str, str]] = []
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"])
        if volume is None:
            raise ValueError(f"volume {mount['name']!r} is mounted but not declared")
        local = PurePosixPath(root) / "volumes" / mount["name"]
        for path, content in _volume_files(volume, secrets, config_maps).items():
            files[str(PurePosixPath("volumes") / mount["name"] / path)] = content
        moved.append((str(mount["mountPath"]).rstrip("/"), str(local)))
    # The longest mount path first: /etc/kubernetes/pki/etcd before /etc/kubernetes/pki.
    moved.sort(key=lambda m: len(m[0]), reverse=True)
    args = [*container.get("command", []), *container.get("args", [])]
    out = []
    for arg in args:
        for mount_path, local in moved:
            if f"={mount_path}/" in arg:
                arg = arg.replace(f"={mount_path}/", f"={local}/", 1)
                break
        out.append(arg)
    address = _flag(out, "advertise-address")
    if not address:
        raise ValueError(f"the {CONTAINER} container has no --advertise-address")
    port = int(_flag(out, "secure-port") or 6443)
    out.append(f"--bind-address={address}")
    return Launch(args=tuple(out), files=files, address=address, port=port)
