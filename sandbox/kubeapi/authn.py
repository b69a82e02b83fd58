"""Who is asking: kube-apiserver's ``--token-auth-file`` and ServiceAccount tokens
(``service_account``, minted by ``Server.service_account_kubeconfig``), for SelfSubjectAccessReviews.

The file is the real server's static token CSV: ``token,user,uid,"group1,group2"`` per line
(groups optional). A request whose bearer token is listed is that user, in its groups and
``system:authenticated``. Any other request (no token, or one not listed, such as the
kubeconfig's own ``sandbox``) is the admin, in ``system:masters``, as every request was before
this file existed: nothing that worked stops working. The admin may impersonate a user
(``impersonated``). Only SelfSubjectAccessReviews look at the
user (``serving.reviews``); ordinary requests are not authorized (see ``DEVIATIONS``). Pure.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()


ADMIN = User("kubernetes-admin", groups=(MASTERS, AUTHENTICATED))
"""Whoever presents no listed token: allowed everything, as in a kind cluster's admin kubeconfig."""


def service_account(namespace: str, name: str) -> User:
    """ServiceAccount ``namespace/name`` as its tokens authenticate it on a real server."""
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED)
    return User(f"system:serviceaccount:{namespace}:{name}", groups=groups)


def parse_token_file(text: str, *, source: str = "token file") -> dict[str, User]:
    """Tokens to users; ValueError naming the line of a malformed entry."""
    users: dict[str, User] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 3 or not row[0].strip() or not row[1].strip():
            raise ValueError(f'{source}:{number}: expected token,user,uid[,"group1,group2"]')
        groups = tuple(g.strip() for g in (row[3] if len(row) > 3 else "").split(",") if g.strip())
        users[row[0].strip()] = User(row[1].strip(), row[2].strip(), (*groups, AUTHENTICATED))
    return users


def identify(users: Mapping[str, User], authorization: str) -> User:
    """The user of a request's ``Authorization`` header."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip() in users:
        return users[token.strip()]
    return ADMIN


def impersonated(caller: User, user: str, groups: Iterable[str]) -> User:
    """``Impersonate-User``/``-Group`` (``kubectl --as``/``--as-group``): the admin may act as
    anyone (kubectl sends no bearer token over plain HTTP, so this is how it asks as a user);
    PermissionError for anyone else (the real server asks RBAC for the impersonate verb)."""
    if not user:
        return caller
    if MASTERS not in caller.groups:
        raise PermissionError(f"{caller.name} may not impersonate {user}")
    return User(user, groups=(*groups, AUTHENTICATED))
