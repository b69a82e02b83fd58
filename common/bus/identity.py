"""NATS identities held in memory (operator mode), for ``common.bus.Options.identity``.

``Held``: a user NKey seed and the JWT minted for it, replaced when renewed (an agent keeps
both in a Secret at its site and renews the JWT over NATS). ``SelfMinted``: a user whose JWT the
process mints itself with the account's signing key (the hub), with a key made at start that
never leaves the process; a fresh JWT once half the lifetime has passed. nats-py asks for the
JWT at every (re)connect, so a new one is used from the next connect on, and the server
disconnects a connection whose JWT expires.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable

from protocol import natsjwt


class Held:
    """A seed and its current JWT. Never printed: ``repr`` names only the public key."""

    def __init__(self, seed: bytes, token: str) -> None:
        self._seed = seed
        self.public_key = natsjwt.public_of(seed)
        self._lock = threading.Lock()
        self._token = ""
        self._expires_at: dt.datetime | None = None
        self.replace(token)

    def __repr__(self) -> str:
        return f"Held({self.public_key})"

    def replace(self, token: str) -> None:
        """Use ``token`` from the next connect on; ValueError if it is not a JWT for this key."""
        claims = natsjwt.decode(token, now=0)  # its own expiry is the server's to judge
        if claims.sub != self.public_key:
            raise ValueError(f"the JWT is for {claims.sub}, not for this identity's key {self.public_key}")
        with self._lock:
            self._token = token
            self._expires_at = dt.datetime.fromtimestamp(claims.exp, dt.UTC) if claims.exp else None

    @property
    def expires_at(self) -> dt.datetime | None:
        return self._expires_at

    def jwt(self) -> str:
        with self._lock:
            return self._token

    def sign(self, nonce: bytes) -> bytes:
        return bytes(natsjwt.key_pair(self._seed).sign(nonce))


class SelfMinted:
    """A user the process mints itself: ``mint(public_key, now)`` returns a signed JWT."""

    def __init__(
        self,
        mint: Callable[[str, dt.datetime], str],
        *,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._mint = mint
        self._clock = clock
        seed = natsjwt.new_seed("user")
        self._held = Held(seed, mint(natsjwt.public_of(seed), clock()))
        self._issued = clock()

    def __repr__(self) -> str:
        return f"SelfMinted({self._held.public_key})"

    @property
    def expires_at(self) -> dt.datetime | None:
        return self._held.expires_at

    def jwt(self) -> str:
        now = self._clock()
        expires = self._held.expires_at
        if expires is not None and now >= self._issued + (expires - self._issued) / 2:
            self._held.replace(self._mint(self._held.public_key, now))
            self._issued = now
        return self._held.jwt()

    def sign(self, nonce: bytes) -> bytes:
        return self._held.sign(nonce)
