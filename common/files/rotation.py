"""Rotating the operator's and the account's signing keys (``nats-config --rotate-*``).

A signing key is rotated in two steps, so that nothing it signed stops working at once:
``rotate`` makes a new key and keeps the old one's public key listed (DIR/operator/<role>-
signing.previous): the operator JWT (operator role) or the account JWT (account role) trusts
both. Once everything signed by the old key has been signed again (the hub re-signs the
account at its start, agents renew their JWTs within their lifetime), ``retire_previous``
drops the old keys from the lists. ``common.files.operator.write`` then writes the JWTs and the
hub's directory for the new state; deploy/README.md walks the whole procedure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from common.files import atomic, operator
from protocol import natsjwt


def rotate(config_dir: Path, role: Literal["operator", "account"]) -> str:
    """A new signing key of ``role``; the current one's public key is kept in the list (what it
    signed stays valid) until ``retire_previous``. The new key's public key."""
    d = config_dir / operator.KEYS_DIR
    current = d / f"{role}-signing.nk"
    old = natsjwt.public_of(operator.load_seed(current, role))
    previous = d / f"{role}-signing.previous"
    atomic.write_public(previous, "".join(f"{k}\n" for k in (old, *operator.previous_keys(previous))))
    current.unlink()
    return natsjwt.public_of(operator.load_seed(current, role))


def retire_previous(config_dir: Path) -> tuple[str, ...]:
    """Forget every rotated-out signing key: what they signed is no longer valid. Their keys."""
    d = config_dir / operator.KEYS_DIR
    gone: list[str] = []
    for role in ("operator", "account"):
        path = d / f"{role}-signing.previous"
        gone += operator.previous_keys(path)
        path.unlink(missing_ok=True)
    return tuple(gone)
