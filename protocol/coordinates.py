"""Where a TenantControlPlane lives: (site, namespace, name), the three tokens of its subjects.

The one shape of the concept: the hub maps an RKCP to ``Coordinates``, indexes what the sites
said by them, and builds subjects from them; the agent checks that a message's body names the
coordinates its subject names. Pure.
"""

from __future__ import annotations

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

    @property
    def key(self) -> tuple[str, str]:
        """(namespace, name) of the TenantControlPlane at its site."""
        return self.namespace, self.name

    def __str__(self) -> str:
        return f"{self.site}/{self.namespace}/{self.name}"
