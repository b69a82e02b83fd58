"""Subject names of the four streams, built and parsed with every token checked.

    <prefix>.intent.<site>.<namespace>.<tcp>     hub → agent of <site>
    <prefix>.status.<site>.<namespace>.<tcp>     agent → hub
    <prefix>.secret.<site>.<namespace>.<tcp>     agent → hub (sealed)
    <prefix>.site.<site>                         agent heartbeat

and, in operator mode, the two request/reply subjects of the hub's credential service
(``protocol.credentials``; core NATS, no stream keeps them):

    <prefix>.bootstrap.<site>                    agent → hub, with the bootstrap credential
    <prefix>.renew.<site>                        agent → hub, with its current credential

Tokens are DNS-1123 labels, so a name can never smuggle in a '.', '*' or '>' and widen a
subject or a permission. The prefix may have several labels (``kb``, ``acme.kb``).
"""

from __future__ import annotations

import enum
from typing import Final

import msgspec

from protocol import errors, labels

DEFAULT_PREFIX: Final = "kb"


class Kind(enum.StrEnum):
    INTENT = "intent"
    STATUS = "status"
    SECRET = "secret"
    SITE = "site"


_PER_CONTROL_PLANE = (Kind.INTENT, Kind.STATUS, Kind.SECRET)


class Parsed(msgspec.Struct, frozen=True):
    """A parsed subject; ``namespace`` and ``name`` are empty for ``Kind.SITE``."""

    kind: Kind
    site: str
    namespace: str = ""
    name: str = ""


def check_prefix(prefix: str) -> str:
    for token in prefix.split("."):
        labels.check(token, field="subject prefix token")
    return prefix


def control_plane(kind: Kind, site: str, namespace: str, name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    if kind not in _PER_CONTROL_PLANE:
        raise errors.SubjectError(f"subject kind {kind.value!r} is not per control plane")
    return ".".join(
        (
            check_prefix(prefix),
            kind.value,
            labels.check(site, field="site"),
            labels.check(namespace, field="namespace"),
            labels.check(name, field="name"),
        )
    )


def intent(site: str, namespace: str, name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    return control_plane(Kind.INTENT, site, namespace, name, prefix=prefix)


def status(site: str, namespace: str, name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    return control_plane(Kind.STATUS, site, namespace, name, prefix=prefix)


def secret(site: str, namespace: str, name: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    return control_plane(Kind.SECRET, site, namespace, name, prefix=prefix)


def heartbeat(site: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """The site's heartbeat subject, ``kb.site.<site>``."""
    return f"{check_prefix(prefix)}.{Kind.SITE.value}.{labels.check(site, field='site')}"


def site_filter(kind: Kind, site: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """Every subject of ``kind`` for one site (``kb.intent.site-a.*.*``); for SITE the subject itself.

    With the exact token count, never ``>``: the same pattern is a stream's subjects, a
    consumer's filter and a site's publish grant, and none of them may admit a longer subject
    (a grant that can be extended reaches other consumers)."""
    if kind is Kind.SITE:
        return heartbeat(site, prefix=prefix)
    return f"{check_prefix(prefix)}.{kind.value}.{labels.check(site, field='site')}.*.*"


def globbed(kind: Kind, *, prefix: str = DEFAULT_PREFIX) -> str:
    """Every subject of ``kind`` across sites: the subjects of one stream."""
    tail = "*" if kind is Kind.SITE else "*.*.*"
    return f"{check_prefix(prefix)}.{kind.value}.{tail}"


def parse(subject: str, *, prefix: str = DEFAULT_PREFIX) -> Parsed:
    """Parse a concrete subject; raise SubjectError naming the subject for anything else."""
    check_prefix(prefix)
    head = prefix + "."
    if not subject.startswith(head):
        raise errors.SubjectError(f"subject {subject!r} does not start with prefix {prefix!r}")
    tokens = subject[len(head) :].split(".")
    try:
        kind = Kind(tokens[0])
    except ValueError:
        raise errors.SubjectError(f"subject {subject!r}: unknown kind {tokens[0]!r}") from None
    expected = 2 if kind is Kind.SITE else 4
    if len(tokens) != expected:
        raise errors.SubjectError(
            f"subject {subject!r}: a {kind.value} subject has {expected} tokens after the prefix, "
            f"got {len(tokens)}"
        )
    try:
        checked = [
            labels.check(t, field=f) for t, f in zip(tokens[1:], ("site", "namespace", "name"), strict=False)
        ]
    except errors.SubjectError as exc:
        raise errors.SubjectError(f"subject {subject!r}: {exc}") from None
    return Parsed(kind, *checked)


class Service(enum.StrEnum):
    """The hub's credential service (``protocol.credentials``)."""

    BOOTSTRAP = "bootstrap"
    RENEW = "renew"


def service(kind: Service, site: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{check_prefix(prefix)}.{kind.value}.{labels.check(site, field='site')}"


def service_globbed(kind: Service, *, prefix: str = DEFAULT_PREFIX) -> str:
    return f"{check_prefix(prefix)}.{kind.value}.*"


def service_site(kind: Service, subject: str, *, prefix: str = DEFAULT_PREFIX) -> str:
    """The site a credential-service subject names; SubjectError for any other subject."""
    head = f"{check_prefix(prefix)}.{kind.value}."
    if not subject.startswith(head):
        raise errors.SubjectError(f"subject {subject!r} is not a {kind.value} request subject")
    try:
        return labels.check(subject[len(head) :], field="site")
    except errors.SubjectError as exc:
        raise errors.SubjectError(f"subject {subject!r}: {exc}") from None
