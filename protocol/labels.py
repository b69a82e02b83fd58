"""DNS-1123 labels: the only strings allowed as subject tokens and Kubernetes names on the wire.

A label is 1 to 63 characters of lower-case letters, digits and '-', starting and ending with an
alphanumeric. This excludes '.', '*', '>' and whitespace, which NATS treats as subject syntax.
The whole string must match (``fullmatch``): with ``re.match``, the ``$`` of ``PATTERN`` also
matches before a final newline, and ``site-c\n`` passed. ``PATTERN`` keeps ``^...$``
for JSON schemas, whose engines read ``$`` as the end of the text.
"""

from __future__ import annotations

import re

from protocol import errors

MAX_LENGTH = 63
PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
_RE = re.compile(PATTERN)


def problem(token: str) -> str | None:
    """Why ``token`` is not a DNS-1123 label, or None if it is one."""
    if not token:
        return "must not be empty"
    if len(token) > MAX_LENGTH:
        return f"must be at most {MAX_LENGTH} characters (got {len(token)})"
    if not _RE.fullmatch(token):
        return (
            "must consist of lower case alphanumeric characters or '-', and must start and end "
            "with an alphanumeric character (no dots, '*', '>' or spaces)"
        )
    return None


def check(token: str, *, field: str) -> str:
    """Return ``token`` if it is a DNS-1123 label; raise SubjectError naming ``field`` otherwise."""
    why = problem(token)
    if why is not None:
        raise errors.SubjectError(f"{field} {token!r} is not a DNS-1123 label: {why}")
    return token
