"""protocol.subjects: builders and the parser refuse any token that is not a DNS-1123 label."""

from __future__ import annotations

import pytest

from protocol import errors, subjects

K = subjects.Kind


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: subjects.intent("site-a", "tenants", "cp1"), "kb.intent.site-a.tenants.cp1"),
        (lambda: subjects.status("site-a", "tenants", "cp1"), "kb.status.site-a.tenants.cp1"),
        (lambda: subjects.secret("site-a", "tenants", "cp1"), "kb.secret.site-a.tenants.cp1"),
        (lambda: subjects.heartbeat("site-a"), "kb.site.site-a"),
        (lambda: subjects.intent("s", "n", "c", prefix="acme.kb"), "acme.kb.intent.s.n.c"),
        (lambda: subjects.site_filter(K.INTENT, "site-a"), "kb.intent.site-a.*.*"),
        (lambda: subjects.site_filter(K.SITE, "site-a"), "kb.site.site-a"),
        (lambda: subjects.globbed(K.STATUS), "kb.status.*.*.*"),
        (lambda: subjects.globbed(K.SITE), "kb.site.*"),
    ],
)
def test_builders(build: object, expected: str) -> None:
    assert build() == expected  # type: ignore[operator]


BAD_TOKENS = ["site.a", "*", ">", "site a", "", "Site", "x" * 64, "-site", "site-", "sité", "a\tb"]


@pytest.mark.parametrize("token", BAD_TOKENS)
@pytest.mark.parametrize("position", ["site", "namespace", "name"])
def test_builders_refuse_bad_tokens(token: str, position: str) -> None:
    args = {"site": "site-a", "namespace": "tenants", "name": "cp1", position: token}
    with pytest.raises(errors.SubjectError, match=position):
        subjects.intent(args["site"], args["namespace"], args["name"])


def test_a_63_character_label_is_allowed() -> None:
    assert subjects.heartbeat("a" * 63) == "kb.site." + "a" * 63


@pytest.mark.parametrize("prefix", ["", "kb.", "KB", "k*b", "kb.>"])
def test_bad_prefix(prefix: str) -> None:
    with pytest.raises(errors.SubjectError, match="prefix"):
        subjects.heartbeat("site-a", prefix=prefix)


@pytest.mark.parametrize(
    ("subject", "expected"),
    [
        ("kb.intent.site-a.tenants.cp1", subjects.Parsed(K.INTENT, "site-a", "tenants", "cp1")),
        ("kb.secret.s.n.c", subjects.Parsed(K.SECRET, "s", "n", "c")),
        ("kb.site.site-a", subjects.Parsed(K.SITE, "site-a")),
    ],
)
def test_parse(subject: str, expected: subjects.Parsed) -> None:
    assert subjects.parse(subject) == expected


@pytest.mark.parametrize(
    ("subject", "mentions"),
    [
        ("other.intent.a.b.c", "prefix"),
        ("kb.orders.a.b.c", "unknown kind"),
        ("kb.intent.a.b", "4 tokens"),
        ("kb.intent.a.b.c.d", "4 tokens"),
        ("kb.site.a.b", "2 tokens"),
        ("kb.intent.a.*.c", "namespace"),
        ("kb.intent.a.b.>", "name"),
        ("kb.status.A.b.c", "site"),
        ("kb.intent.a..c", "namespace"),
    ],
)
def test_parse_refuses(subject: str, mentions: str) -> None:
    with pytest.raises(errors.SubjectError, match=mentions) as exc:
        subjects.parse(subject)
    assert subject in str(exc.value)


def test_parse_inverts_build() -> None:
    for kind in (K.INTENT, K.STATUS, K.SECRET):
        subject = subjects.control_plane(kind, "site-x", "ns-1", "tcp-2", prefix="acme.kb")
        assert subjects.parse(subject, prefix="acme.kb") == subjects.Parsed(kind, "site-x", "ns-1", "tcp-2")
