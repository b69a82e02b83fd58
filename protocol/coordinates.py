"""Where a TenantControlPlane lives: (site, namespace, name), the three tokens of its subjects.

The one shape of the concept: the hub maps an RKCP to ``Coordinates``, indexes what the sites
said by them, and builds subjects from them; the agent checks that a message's body names the
coordinates its subject names. Pure.
"""

from __future__ import annotations

import sys
from typing import NamedTuple, Protocol


class Located(Protocol):
    """A message that names a control plane (an intent, a status, sealed secrets)."""

    @property
    def site(self) -> str: ...

    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...


class Coordinates(NamedTuple):
    site: str
    namespace: str
    name: str

    @classmethod
    def of(cls, message: Located) -> Coordinates:
        return cls(message.site, message.namespace, message.name)

    def shared(self, name: str | None = None) -> Coordinates:
        """The same coordinates with the site and namespace strings every holder of them shares
        (each message decodes them anew; thousands of control planes name a handful), and
        ``name`` in place of an equal name of its own when given (the caller's key's string)."""
        kept = name if name is not None and name == self.name else self.name
        return Coordinates(sys.intern(self.site), sys.intern(self.namespace), kept)

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name) of the TenantControlPlane at its site."""
        return self.namespace, self.name

    def __str__(self) -> str:
        return f"{self.site}/{self.namespace}/{self.name}"
