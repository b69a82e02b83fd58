"""The agent's NATS credential in operator mode, decided: what its identity Secret holds, whether
that JWT may be used, when to renew it, and what /readyz says about it.

Pure: no clock reads (``now`` is a unix timestamp passed in), no I/O. ``agent.credential.keeper`` reads
and writes the Secret and talks to the hub; this module decides. The seed is bytes that only
pass through here: no message built here contains it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Final

from common import jwtlifetime
from protocol import errors, natsjwt

# The lifetime rule is shared with `kamaji-broker doctor` (common.jwtlifetime); these names
# stay here for the agent's callers.
Lifetime = jwtlifetime.Lifetime
lifetime_of = jwtlifetime.lifetime_of
readiness = jwtlifetime.readiness
next_change = jwtlifetime.next_change
_iso = jwtlifetime.iso

SEED_KEY: Final = "seed"
"""The Secret's key holding the agent's user NKey seed (made at the site, never sent)."""
JWT_KEY: Final = "jwt"
"""The Secret's key holding the current user JWT the hub minted for that seed."""


@dataclass(frozen=True)
class Stored:
    """What the identity Secret holds (absent or unreadable parts are None)."""

    exists: bool
    seed: bytes | None = None
    jwt: str | None = None
    resource_version: str | None = None


def read(secret: dict[str, Any] | None) -> Stored:
    """The identity Secret's content; a seed that is not one counts as absent (named nowhere)."""
    if secret is None:
        return Stored(exists=False)
    data = secret.get("data") or {}
    version = (secret.get("metadata") or {}).get("resourceVersion")
    seed = _decoded(data.get(SEED_KEY))
    if seed is not None:
        try:
            natsjwt.key_pair(seed)
        except errors.JWTError:
            seed = None
    token = _decoded(data.get(JWT_KEY))
    return Stored(
        exists=True,
        seed=seed,
        jwt=token.decode("ascii", "replace") if token else None,
        resource_version=version,
    )


def _decoded(value: object) -> bytes | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=True).strip() or None
    except ValueError:
        return None


def body(
    namespace: str, name: str, *, seed: bytes, jwt: str | None, resource_version: str | None
) -> dict[str, Any]:
    """The identity Secret holding ``seed`` (and ``jwt``, once the hub minted one)."""
    data = {SEED_KEY: base64.b64encode(seed).decode("ascii")}
    if jwt:
        data[JWT_KEY] = base64.b64encode(jwt.encode("ascii")).decode("ascii")
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/part-of": "kamaji-broker", "app.kubernetes.io/component": "agent"},
    }
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "data": data}


def usable(stored: Stored, *, now: float) -> tuple[Lifetime | None, str]:
    """The lifetime of the stored JWT if it is one for the stored seed and not expired, else
    None and why not (a bootstrap is then needed)."""
    if stored.seed is None:
        return None, "no seed"
    if not stored.jwt:
        return None, "no JWT yet"
    try:
        claims = natsjwt.decode(stored.jwt, now=0)
    except errors.JWTError as exc:
        return None, f"the stored JWT is unreadable ({exc})"
    if claims.sub != natsjwt.public_of(stored.seed):
        return None, "the stored JWT is for another key"
    life = lifetime_of(claims)
    if life.expires <= now:
        return None, f"the stored JWT expired at {_iso(life.expires)}"
    return life, "valid"


def renew_at(life: Lifetime, *, renew_before: float | None) -> float:
    """When to start renewing: ``renew_before`` seconds before expiry, by default once two
    thirds of the lifetime have passed; never before the issue time."""
    if life.expires == float("inf"):
        return float("inf")
    before = (life.expires - life.issued) / 3 if renew_before is None else renew_before
    return max(life.issued, life.expires - before)


def failed(what: str, reason: str, *, retry_in: float) -> str:
    """/readyz while bootstrapping (or keeping the Secret) fails."""
    return f"{what} failed: {reason}; retrying in {retry_in:.1f}s"
