"""protocol.permissions: exactly the subjects of DESIGN §4."""

from __future__ import annotations

import pytest

from protocol import errors, permissions


def test_site_permissions_are_exactly_its_own_subjects() -> None:
    p = permissions.for_site("site-a")
    assert p.publish == (
        "kb.status.site-a.>",
        "kb.secret.site-a.>",
        "kb.site.site-a",
        "$JS.API.CONSUMER.MSG.NEXT.KB_INTENTS.agent-site-a",
        "$JS.API.CONSUMER.INFO.KB_INTENTS.agent-site-a",
        "$JS.API.DIRECT.GET.KB_INTENTS.kb.intent.site-a.>",
        "$JS.ACK.KB_INTENTS.agent-site-a.>",
        "$JS.ACK.*.*.KB_INTENTS.agent-site-a.>",
    )
    assert p.subscribe == ("_INBOX_site-a.>",)


def test_hub_inbox_cannot_overlap_a_site_inbox() -> None:
    hub = permissions.for_hub()
    assert hub.subscribe == ("_INBOX.>",)
    assert "kb.intent.>" in hub.publish
    assert not any(s.startswith(("kb.status", "kb.secret", "kb.site")) for s in hub.publish)


@pytest.mark.parametrize("site", ["site.a", "*", ">", "Site", ""])
def test_refuses_a_bad_site(site: str) -> None:
    with pytest.raises(errors.SubjectError):
        permissions.for_site(site)
