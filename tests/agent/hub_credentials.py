"""A stand-in for the hub's credential service, for the agent's operator-mode tests.

Answers ``<prefix>.bootstrap.*`` and ``<prefix>.renew.*`` with the hub's creds of a conf dir made
by ``tests.conftest.operator_mode_server``: checks each request as the hub must
(``protocol.credentials.decode/check``, and that the credential it comes with is the right kind
for the site), and mints a site JWT for the requester's key with the account's signing key, as
``natsoperator.Keys.user_creds`` signs. ``refuse`` makes it answer with that error instead.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from common import bus, natsoperator
from protocol import credentials, errors, natsjwt, subjects
from tests import helpers


@dataclass
class Responder:
    conn: bus.Connection
    keys: natsoperator.Keys
    prefix: str = subjects.DEFAULT_PREFIX
    lifetime: dt.timedelta = dt.timedelta(hours=1)
    refuse: str = ""
    """While set, every request is answered with this error."""
    granted: list[credentials.Request] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    subscriptions: list[bus.Subscription] = field(default_factory=list)

    def kinds(self) -> list[credentials.Kind]:
        return [r.kind for r in self.granted]

    async def start(self) -> Responder:
        for kind in (subjects.Service.BOOTSTRAP, subjects.Service.RENEW):
            glob = subjects.service_globbed(kind, prefix=self.prefix)
            self.subscriptions.append(await self.conn.subscribe(glob, self._answer))
        return self

    async def _answer(self, message: bus.Message) -> None:
        *_, kind_token, site = message.subject.split(".")
        kind = credentials.Kind(kind_token)
        now = dt.datetime.now(dt.UTC)
        try:
            request = credentials.decode(message.data)
            credentials.check(request, kind=kind, site=site, now=now)
            self._check_credential(request, kind=kind, site=site)
            if self.refuse:
                raise errors.CredentialError(self.refuse)
        except (errors.DecodeError, errors.CredentialError, errors.JWTError) as exc:
            self.refused.append(str(exc))
            reply = credentials.Reply(error=str(exc))
        else:
            claims = credentials.site_user(
                site,
                request.public_key,
                account=self.keys.account_public,
                now=now,
                lifetime=self.lifetime,
                prefix=self.prefix,
            )
            reply = credentials.Reply(jwt=natsjwt.encode(claims, natsjwt.key_pair(self.keys.account_signing)))
            self.granted.append(request)
        await self.conn.respond(message, msgspec.json.encode(reply))

    def _check_credential(self, request: credentials.Request, *, kind: credentials.Kind, site: str) -> None:
        claims = natsjwt.decode(request.credential)
        if kind is credentials.Kind.BOOTSTRAP:
            if credentials.site_named(claims, role="bootstrap") != site:
                raise errors.CredentialError("a bootstrap credential of another site")
        elif claims.sub != request.public_key or credentials.site_named(claims, role="site") != site:
            raise errors.CredentialError("a renewal must come with the requester's own site JWT")

    async def stop(self) -> None:
        for sub in self.subscriptions:
            await sub.unsubscribe()
        self.subscriptions.clear()


async def responder(url: str, conf: Path, **kw: object) -> Responder:
    """A started responder, connected with ``conf``'s hub.creds."""
    conn = await bus.connect(helpers.options(url, seed_file=conf / "hub.creds"), deadline=10)
    return await Responder(conn, natsoperator.Keys.load_or_create(conf), **kw).start()  # type: ignore[arg-type]


def bootstrap_creds(
    conf: Path,
    path: Path,
    *,
    site: str = "site-a",
    prefix: str = subjects.DEFAULT_PREFIX,
    age: dt.timedelta = dt.timedelta(0),
) -> Path:
    """A bootstrap .creds for ``site`` issued ``age`` ago (valid for an hour), as ``kamaji-broker
    site add`` hands it over."""
    keys = natsoperator.Keys.load_or_create(conf)
    now = dt.datetime.now(dt.UTC) - age
    path.write_text(keys.bootstrap_creds(site, now=now, lifetime=dt.timedelta(hours=1), prefix=prefix))
    return path
