"""protocol.__all__ is the public surface: everything listed exists, nothing private leaks."""

from __future__ import annotations

import protocol


def test_exported_members() -> None:
    exported = set(protocol.__all__)
    public = {name for name in dir(protocol) if not name.startswith("_")}
    assert exported == public
    for name in exported:
        assert getattr(protocol, name) is not None
