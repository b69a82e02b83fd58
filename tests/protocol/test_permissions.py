"""protocol.permissions: exactly the subjects each identity is granted, and the pattern intersection that
the generated grant test (tests/security/test_grants.py) is built on."""

from __future__ import annotations

import pytest

from protocol import errors, permissions, subjects


def test_site_permissions_are_exactly_its_own_subjects() -> None:
    p = permissions.for_site("site-a")
    assert p.publish == (
        "kb.status.site-a.*.*",
        "kb.secret.site-a.*.*",
        "kb.site.site-a",
        "$JS.API.CONSUMER.MSG.NEXT.KB_INTENTS.agent-site-a",
        "$JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a",
        "$JS.API.CONSUMER.RESET.KB_INTENTS.agent-site-a",
        "$JS.API.DIRECT.GET.KB_INTENTS.kb.intent.site-a.*.*",
        "$JS.API.DIRECT.GET.KB_SITE_site-a.kb.site.site-a",
        "$JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*",
        "kb.renew.site-a",
    )
    assert p.subscribe == ("_INBOX_site-a.>",)
    assert not p.reply_to_requests


def test_bootstrap_permissions_ask_only_for_the_sites_first_credential() -> None:
    p = permissions.for_bootstrap("site-a")
    assert p.publish == ("kb.bootstrap.site-a",)
    assert p.subscribe == ("_INBOX_BOOTSTRAP_site-a.>",)  # not the agent's inbox
    assert not p.reply_to_requests


def test_site_permissions_follow_a_dotted_prefix() -> None:
    p = permissions.for_site("s", prefix="acme.kb")
    assert p.publish == (
        "acme.kb.status.s.*.*",
        "acme.kb.secret.s.*.*",
        "acme.kb.site.s",
        "$JS.API.CONSUMER.MSG.NEXT.ACME_KB_INTENTS.agent-s",
        "$JS.API.CONSUMER.INFO.ACME_KB_INTENTS.agent-s",
        "$JS.API.CONSUMER.RESET.ACME_KB_INTENTS.agent-s",
        "$JS.API.DIRECT.GET.ACME_KB_INTENTS.acme.kb.intent.s.*.*",
        "$JS.API.DIRECT.GET.ACME_KB_SITE_s.acme.kb.site.s",
        "$JS.ACK.ACME_KB_INTENTS.agent-s.*.*.*.*.*",
        "acme.kb.renew.s",
    )


def test_hub_permissions() -> None:
    hub = permissions.for_hub()
    assert hub.publish == ("kb.intent.*.*.*", "$JS.API.>")  # its consumers have no acks: no $JS.ACK
    # never a site's _INBOX_<site>; the credential service's requests
    assert hub.subscribe == ("_INBOX.>", "kb.bootstrap.*", "kb.renew.*")
    assert hub.reply_to_requests  # its answers go to the asking site's inbox
    assert not any(s.startswith(("kb.status", "kb.secret", "kb.site")) for s in hub.publish)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (subjects.Kind.INTENT, "kb.intent.site-a.*.*"),
        (subjects.Kind.STATUS, "kb.status.site-a.*.*"),
        (subjects.Kind.SECRET, "kb.secret.site-a.*.*"),
        (subjects.Kind.SITE, "kb.site.site-a"),
    ],
)
def test_site_subjects_have_the_exact_token_count(kind: subjects.Kind, expected: str) -> None:
    assert subjects.site_filter(kind, "site-a") == expected


@pytest.mark.parametrize("site", ["site.a", "*", ">", "Site", "", "site-a\n", " site-a", "site a"])
def test_refuses_a_bad_site(site: str) -> None:
    with pytest.raises(errors.SubjectError):
        permissions.for_site(site)


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # literals
        ("a.b.c", "a.b.c", True),
        ("a.b.c", "a.b.d", False),
        ("a.b", "a.b.c", False),
        ("a.b.c", "a.b", False),
        ("site", "site-a", False),  # a name that is a prefix of another is another token
        # '*': exactly one token, on either side
        ("a.*.c", "a.b.c", True),
        ("a.b.c", "a.*.c", True),
        ("a.*", "a.b.c", False),
        ("a.*.*", "a.b", False),
        ("*.b", "a.*", True),
        ("*.*", "*.*", True),
        ("*", "a.b", False),
        # '>': one or more tokens, on either side
        ("a.>", "a.b", True),
        ("a.>", "a.b.c.d", True),
        ("a.>", "a", False),
        ("a", "a.>", False),
        ("a.b.c", "a.>", True),
        (">", "a", True),
        (">", "a.b.c", True),
        ("a.>", "b.>", False),
        ("a.>", "*.b", True),
        ("a.>", "a.>", True),
        ("a.b.>", "a.*.c.>", True),
        ("a.*.>", "a.b", False),
        ("*.>", "a", False),
        # the pull through an ack subject: the old site grant and the hub's consumer's ack subscription
        ("$JS.ACK.*.*.KB_INTENTS.agent-site-a.>", "$JS.ACK.KB_STATUS.hub-status.>", True),
        ("$JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*", "$JS.ACK.KB_STATUS.hub-status.>", False),
        ("$JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*", "$JS.ACK.KB_INTENTS.agent-site-a.>", True),
        ("$JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*", "$JS.ACK.KB_INTENTS.agent-site.>", False),
        # a wildcard-looking character inside a token is literal
        ("a.b*", "a.bc", False),
        ("a.b>", "a.b.c", False),
    ],
)
def test_intersects(a: str, b: str, expected: bool) -> None:
    assert permissions.intersects(a, b) is expected
    assert permissions.intersects(b, a) is expected  # symmetric


@pytest.mark.parametrize("pattern", ["", "a..b", ".a", "a.", "a.>.b", "> .a", "a. b", "a.b\n"])
def test_intersects_refuses_a_malformed_pattern(pattern: str) -> None:
    with pytest.raises(ValueError, match="subject pattern"):
        permissions.intersects(pattern, "a.b")
    with pytest.raises(ValueError, match="subject pattern"):
        permissions.intersects("a.b", pattern)
