"""Doctor checks of a NATS user JWT: valid and not near expiry, and granting what the role needs.

Pure apart from ``token_of_creds`` (which reads the JWT of a .creds file, never its seed): a JWT
is public, the seed is never passed here, and the caller passes ``now``. The expiry rule is the
agent's ``/readyz`` rule (``common.jwtlifetime``): FAIL once expired, WARN once less than a
tenth of the lifetime is left; the same for a bootstrap credential (``bootstrap``), which is
only used until the process has a credential of its own.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from common import jwtlifetime
from common.doctor import results
from common.doctor.results import Result
from protocol import errors, natsjwt, permissions

CREDENTIAL = "credential valid"
GRANTS = "credential permissions"


def lifetime(claims: natsjwt.Claims, *, now: float, where: str, fix: str) -> Result:
    """The JWT of ``where`` judged by the /readyz rule; ``fix`` says how to get a fresh one."""
    life = jwtlifetime.lifetime_of(claims)
    ready, text = jwtlifetime.readiness(life, now=now)
    detail = f"{where}: {claims.name or claims.sub}: {text}"
    if life.expires <= now:
        return results.failed(CREDENTIAL, detail, fix)
    if not ready:
        return results.warned(CREDENTIAL, detail, f"renewal is overdue: {fix}")
    return results.passed(CREDENTIAL, detail)


def bootstrap(claims: natsjwt.Claims, *, now: float, where: str, fix: str) -> Result:
    """A bootstrap credential the process will use at its first start (``where`` says why and
    which file): FAIL once expired, WARN once less than a tenth of its lifetime is left."""
    life = jwtlifetime.lifetime_of(claims)
    ready, text = jwtlifetime.readiness(life, now=now)
    detail = f"{where} ({claims.name or claims.sub}: {text})"
    if life.expires <= now:
        return results.failed(CREDENTIAL, detail, fix)
    if not ready:
        return results.warned(CREDENTIAL, detail, f"start the process before it expires, or {fix}")
    return results.passed(CREDENTIAL, detail)


def _entries(publish: tuple[str, ...], subscribe: tuple[str, ...], replies: bool) -> set[str]:
    entries = {f"publish {s}" for s in publish} | {f"subscribe {s}" for s in subscribe}
    return entries | ({"reply to requests"} if replies else set())


def grant_diff(
    user: natsjwt.User, expected: permissions.Permissions
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(missing, extra): what the role needs that the JWT lacks, and what it grants beyond."""
    have = _entries(user.pub.allow, user.sub.allow, user.resp is not None)
    want = _entries(expected.publish, expected.subscribe, expected.reply_to_requests)
    return tuple(sorted(want - have)), tuple(sorted(have - want))


def grants(
    claims: natsjwt.Claims,
    expected: permissions.Permissions,
    *,
    role: str,
    fix: str,
    doctor_only: Collection[str] = (),
) -> Result:
    """PASS when the JWT grants exactly what ``role`` needs, FAIL naming missing and extra ones.

    ``doctor_only``: grants (``publish <subject>``) that only doctor uses, never the process; a
    JWT minted before they existed lacks just those, and still works: a WARN, not a FAIL."""
    if not isinstance(claims.nats, natsjwt.User):
        return results.failed(GRANTS, f"the JWT is an {claims.role}'s, not a user's", fix)
    missing, extra = grant_diff(claims.nats, expected)
    if not missing and not extra:
        return results.passed(GRANTS, f"exactly what {role} needs ({len(expected.publish)} publish, "
                              f"{len(expected.subscribe)} subscribe)")  # fmt: skip
    if not extra and set(missing) <= set(doctor_only):
        return results.warned(
            GRANTS,
            f"{claims.name or claims.sub} lacks what only doctor reads with: " + "; ".join(missing),
            f"it works without; for doctor to read it too, {fix}",
        )
    parts = []
    if missing:
        parts.append("missing: " + "; ".join(missing))
    if extra:
        parts.append("extra: " + "; ".join(extra))
    return results.failed(GRANTS, f"{claims.name or claims.sub} is not {role}'s: " + " | ".join(parts), fix)


def static_user(flag: str, path: str) -> Result:
    """An NKey seed: the server's auth.conf holds its permissions, and it never expires."""
    return results.passed(
        CREDENTIAL, f"static user ({flag} {path}), no expiry; its permissions are probed below"
    )


def token_of_creds(path: Path) -> str:
    """The user JWT of a ``.creds`` file ("" when it holds none: ``natsjwt.decode`` then says so);
    its seed is not read."""
    try:
        return natsjwt.jwt_of_creds(path.read_text())
    except (errors.JWTError, UnicodeDecodeError):
        return ""
