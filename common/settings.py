"""Settings every long-lived process shares (hub and agent): NATS, Kubernetes, namespaces, health, logs.

Subclasses add their own fields; a flag on the command line wins over its environment variable
(``env_prefix`` per subclass), and every check names the field (the CLI turns it into a flag).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Annotated, Self

from pydantic import AfterValidator, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from common import logs
from common.durations import Duration
from protocol import labels, subjects


def split(value: str) -> tuple[str, ...]:
    """``"b, a,,b"`` → ``("a", "b")``: a comma-separated list, trimmed, de-duplicated, sorted."""
    return tuple(sorted({v.strip() for v in value.split(",") if v.strip()}))


def _existing_file(path: Path) -> Path:
    if not path.is_file():
        raise ValueError(f"file {str(path)!r} does not exist")
    return path


ExistingFile = Annotated[Path, AfterValidator(_existing_file)]
"""A path that must name a file when the settings are read (a key, a kubeconfig, a CA)."""


def check_labels(value: str, *, what: str) -> str:
    for item in split(value):
        why = labels.problem(item)
        if why:
            raise ValueError(f"{what} {item!r} is not a DNS-1123 label: {why}")
    return value


NamespaceList = Annotated[str, AfterValidator(functools.partial(check_labels, what="namespace"))]
"""Comma-separated namespaces, each a DNS-1123 label."""
SiteList = Annotated[str, AfterValidator(functools.partial(check_labels, what="site"))]
"""Comma-separated site names, each a DNS-1123 label."""


class ProcessSettings(BaseSettings):
    model_config = SettingsConfigDict(extra="forbid", use_attribute_docstrings=True)

    nats_url: str
    """One or more NATS URLs, comma separated."""
    nats_seed: ExistingFile | None = None
    """An NKey seed file (from ``kamaji-broker nats-config`` or ``site add``)."""
    nats_creds: ExistingFile | None = None
    """A .creds file instead of a seed (servers in operator/JWT mode)."""
    nats_ca_file: ExistingFile | None = None
    """CA certificate (PEM) the NATS server's certificate must chain to (``nats-config
    --tls-generate``: tls/ca.crt). With it the connection is TLS from the first byte, trusting
    only this CA; without it, ``tls://`` URLs are verified against the system's CAs."""
    nats_ping_interval: Annotated[Duration, Field(gt=0, le=600)] = 20.0
    """Seconds between PINGs to the NATS server; a connection that answers three in a row with
    silence is left for a new one: a link that died without a word (a half-open connection) is
    noticed after about four of these. At most 10 minutes."""
    kubeconfig: ExistingFile | None = None
    """Kubeconfig of the cluster this process works in (or --in-cluster)."""
    in_cluster: bool = False
    """Reach the cluster this process works in with the pod's service account (instead of
    --kubeconfig)."""
    namespaces: NamespaceList = ""
    """Comma-separated namespaces to work in; empty with --all-namespaces."""
    all_namespaces: bool = False
    """Work in every namespace (instead of --namespaces)."""
    listen: str = ":8080"
    """Address of /healthz, /readyz and /metrics."""
    prefix: str = subjects.DEFAULT_PREFIX
    """Subject prefix shared by hub and agents."""
    log_format: logs.Format = "json"
    """Log lines as ``json`` (one object per line, for a log pipeline) or ``text`` (time, level,
    logger, message, then key=value fields: for a terminal). JSON by default: what collectors parse."""

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        subjects.check_prefix(v)
        return v

    @model_validator(mode="after")
    def _one_of_each(self) -> Self:
        self._check_nats_identity()
        if (self.kubeconfig is None) == (not self.in_cluster):
            raise ValueError("give exactly one of --kubeconfig or --in-cluster")
        self._check_scope()
        return self

    def _nats_identities(self) -> dict[str, bool]:
        """Each way this process may be given its NATS identity (by flag) and whether it was.
        A subclass with another way adds it: the agent's operator mode (its own key, a JWT from
        the hub), the hub minting its own."""
        return {"--nats-seed": self.nats_seed is not None, "--nats-creds": self.nats_creds is not None}

    def _check_nats_identity(self) -> None:
        ways = self._nats_identities()
        given = [flag for flag, used in ways.items() if used]
        if len(given) != 1:
            choices = ", ".join(ways)
            got = f"; got {' and '.join(given)}" if given else ""
            raise ValueError(f"give exactly one NATS identity: one of {choices}{got}")

    def _check_scope(self) -> None:
        """Where the process works: a subclass with more ways to say it (the hub's --namespace)
        replaces this check."""
        if bool(self.namespace_list) == self.all_namespaces:
            raise ValueError("give exactly one of --namespaces a,b or --all-namespaces")

    @property
    def namespace_list(self) -> tuple[str, ...]:
        return split(self.namespaces)

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(u.strip() for u in self.nats_url.split(",") if u.strip())
