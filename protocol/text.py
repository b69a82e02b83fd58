"""Text a peer sent, made harmless to whoever stores or prints it.

Every string a site puts in a message (a status's reason, message and version, its endpoint's
host, a heartbeat's agent version and key ids) ends up in an RKCP condition, a Site status, a
log line, ``kubectl describe`` or ``kamaji-broker status`` on an operator's terminal. A site is
not trusted with that terminal: an ``ESC [2J`` would clear it and draw a fake verdict, an OSC 8
sequence would plant a hyperlink, U+202E would turn the rest of the line around.

    harmless    every character ``str.isprintable`` refuses (C0 and C1 controls, DEL, the
                bidirectional overrides and isolates and other format characters, line and
                paragraph separators, unassigned and private-use code points) written as its
                Python escape (``\\n``, ``\\x1b``, ``\\u202e``), and the length bounded; idempotent
    escaped     the same escapes, the length as it is
    is_reason   a ``metav1.Condition`` reason (CamelCase, apimachinery's own pattern)
    is_host     a DNS name or an IP address, as an API endpoint's host must be
    Finding     a field a check replaced: which field, why, and its value made harmless

Pure: no I/O. ``protocol.messages`` applies these when it decodes what a site sends, so nothing
downstream ever sees the raw text.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Final

ELLIPSIS: Final = "\u2026"
"""Ends a value cut at its limit, so a reader sees that it was cut."""

REASON_MAX: Final = 1024
"""metav1.Condition's limit for ``reason``."""
REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""metav1.Condition's ``reason`` pattern, copied from k8s.io/apimachinery."""
_REASON = re.compile(REASON_PATTERN.removesuffix("$") + r"\Z")

HOST_MAX: Final = 253
_DNS_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*\Z")
_DNS_LABEL_MAX: Final = 63


_SHORT_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(ch: str) -> str:
    if ch in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[ch]
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def escaped(value: str) -> str:
    """``value`` with every non-printable character escaped, whatever its length (a log line's
    message: one record stays one line, and a terminal shown it runs no sequence)."""
    if value.isprintable():
        return value
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in value)


def harmless(value: str, *, limit: int) -> str:
    """``value`` with every non-printable character escaped, at most ``limit`` characters long
    (cut values end with an ellipsis; an escape is never cut in half)."""
    if value.isprintable() and len(value) <= limit:
        return value  # the common case: nothing to do
    pieces: list[str] = []
    length = 0
    for ch in value:
        piece = ch if ch.isprintable() else _escape(ch)
        pieces.append(piece)
        length += len(piece)
    if length <= limit:
        return "".join(pieces)
    kept: list[str] = []
    room = limit - len(ELLIPSIS)
    for piece in pieces:
        if len(piece) > room:
            break
        kept.append(piece)
        room -= len(piece)
    return "".join(kept) + ELLIPSIS


def is_reason(value: str) -> bool:
    """Whether ``value`` may be a condition's reason."""
    return len(value) <= REASON_MAX and _REASON.match(value) is not None


def is_host(value: str) -> bool:
    """Whether ``value`` is a DNS name (RFC 1123, any case) or an IPv4 or IPv6 address.

    An IPv6 zone id (``fe80::1%eth0``) is refused: Python's ``ipaddress`` takes any characters
    after the ``%``, escapes included, and a zone names an interface of the site's own host,
    which means nothing to a client elsewhere."""
    if not value or len(value) > HOST_MAX or "%" in value or not value.isprintable():
        return False
    try:
        ipaddress.ip_address(value)
    except ValueError:
        pass
    else:
        return True
    return _DNS_NAME.match(value) is not None and all(len(p) <= _DNS_LABEL_MAX for p in value.split("."))


@dataclasses.dataclass(frozen=True)
class Finding:
    """A field of a peer's message that a check replaced with a safe value."""

    field: str
    """Its path in the message, e.g. ``reason``, ``endpoint.host``."""
    code: str
    """What it failed, in CamelCase (a metric label): ``InvalidReason``, ``InvalidHost``, …"""
    why: str
    """What it failed, in words, ending with what it was replaced by."""
    shown: str
    """The value that came, made harmless and short: safe to log."""

    def __str__(self) -> str:
        return f'field {self.field} "{self.shown}" {self.why}'


SHOWN_MAX: Final = 64
"""Characters of a refused value a finding keeps, to be logged."""


def finding(field: str, value: str, *, code: str, why: str) -> Finding:
    return Finding(field=field, code=code, why=why, shown=harmless(value, limit=SHOWN_MAX))
