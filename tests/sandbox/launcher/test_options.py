"""A system's options are checked when made: what cannot run together is named."""

from __future__ import annotations

from typing import Any

import pytest

from sandbox.launcher import Options


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"sites": ()}, "a system needs at least one site"),
        ({"kubernetes": "kind"}, "kubernetes must be one of emulator, real, got 'kind'"),
        ({"kamaji": "real"}, "kamaji 'real' runs on real clusters"),
        ({"capi": "real"}, "capi 'real' runs on real clusters"),
        ({"nats_nodes": 0}, "nats_nodes must be at least 1"),
        ({"hub_replicas": 0}, "hub_replicas must be at least 1"),
        ({"sites": ("mgmt",)}, "'mgmt' names the management cluster"),
        ({"site_links": True, "kubernetes": "real"}, "site_links puts emulated sites in network namespaces"),
    ],
)
def test_options_that_cannot_run_say_which(fields: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said.replace("(", r"\(")):
        Options(**fields)


@pytest.mark.parametrize("fields", [{}, {"site_links": True}, {"kubernetes": "real", "kamaji": "real"}])
def test_options_that_run_together_are_taken(fields: dict[str, Any]) -> None:
    assert Options(**fields).sites == ("site-a", "site-b")
