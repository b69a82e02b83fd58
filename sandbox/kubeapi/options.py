"""Settings of a server (watch timing, token users) and the parsing of common query parameters.

Owns ``Settings`` (watch timing), ``Write`` and ``Deletion`` (the options of one write or
delete), the Go-compatible parsing of boolean, integer, ``dryRun``, ``fieldValidation`` and
``resourceVersion`` query parameters, and the list ``continue`` token format; shared by the
HTTP modules (``serving``), ``state.store`` and ``state.listing``. Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from sandbox.kubeapi import authn, errors


@dataclass
class Settings:
    bookmark_interval: float = 10.0
    """Seconds between BOOKMARK events on an idle watch that asked for them (the real server: ~1 min)."""
    default_watch_timeout: float = 1800.0
    """Seconds a watch without ``timeoutSeconds`` stays open (the real server: 30-60 min)."""
    users: dict[str, authn.User] = field(default_factory=dict)
    """Bearer tokens of the token auth file and their users (``authn``); none: all are admin."""


@dataclass(frozen=True)
class Write:
    """The options of one create or update: ``dryRun``, ``fieldValidation``, where warnings go."""

    dry_run: bool = False
    field_validation: str = "Warn"
    #: Collects the write's warnings (one per pruned unknown field under Warn); None drops them.
    warnings: list[str] | None = None
    manager: str = ""
    """The field manager (``fieldManager``, else the User-Agent's product) its Update is recorded under."""
    operation: str = "Update"
    """``Apply`` when the body carries managedFields ``apply.managedfields.applied`` computed."""


#: A plain write: not a dry run, the server's default fieldValidation, warnings dropped.
PLAIN_WRITE = Write()


@dataclass(frozen=True)
class Deletion:
    """The DeleteOptions of one delete: propagationPolicy, preconditions, ``dryRun``."""

    propagation: str = "Background"
    uid: str | None = None
    resource_version: str | None = None
    dry_run: bool = False


#: A plain delete: background propagation, no preconditions, not a dry run.
PLAIN_DELETE = Deletion()


def write(query: Any, warnings: list[str], *, user_agent: str = "") -> Write:
    """The write options of a request's query, collecting warnings into ``warnings``; the manager
    of a request without ``fieldManager`` is its User-Agent's first word, as the real server's."""
    manager = query.get("fieldManager") or user_agent.split("/", 1)[0] or "unknown"
    return Write(dry_run(query), field_validation(query), warnings, manager=str(manager))


def flag(value: str | None) -> bool:
    """A boolean query parameter, parsed as Go's strconv.ParseBool (clients send "true" or "True")."""
    return value in ("1", "t", "T", "TRUE", "true", "True")


def dry_run(query: Any) -> bool:
    return "All" in query.getall("dryRun", [])


def integer(value: str | None, name: str) -> int:
    if not value:
        return 0
    try:
        return max(int(value), 0)
    except ValueError as exc:
        raise errors.bad_request(f"invalid {name} {value!r}") from exc


def field_validation(query: Any) -> str:
    """fieldValidation: Ignore, Warn (the server default) or Strict."""
    value = query.get("fieldValidation") or "Warn"
    if value not in ("Ignore", "Warn", "Strict"):
        raise errors.bad_request(
            f'fieldValidation: Unsupported value: "{value}": supported values: "Ignore", "Strict", "Warn"'
        )
    return str(value)


def parse_rv(text: str | None) -> int:
    try:
        value = int(text or "0")
    except ValueError as exc:
        raise errors.bad_request(f'invalid resourceVersion "{text}"') from exc
    if value < 0:
        raise errors.bad_request(f'invalid resourceVersion "{text}"')
    return value


def encode_continue(rv: int, last: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(last)}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc
