"""protocol.natsjwt: NATS JWTs round-trip, and every tampering or mismatch is refused by name.

nats-server's acceptance of these JWTs is proven against a real server in
tests/security/test_operator_mode.py; here, the encoding and the checks of our own decoder.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time

import pytest

from protocol import errors, natsjwt


def _claims_json(token: str) -> dict[str, object]:
    part = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # type: ignore[no-any-return]


def _user(account_seed: bytes, *, exp: int = 0, iat: int = 0) -> tuple[str, bytes]:
    user = natsjwt.new_seed("user")
    claims = natsjwt.Claims(
        sub=natsjwt.public_of(user),
        iss="",
        iat=iat,
        exp=exp,
        name="site-a",
        nats=natsjwt.User(
            pub=natsjwt.Allow(("kb.status.site-a.*.*",)), sub=natsjwt.Allow(("_INBOX_site-a.>",))
        ),
    )
    return natsjwt.encode(claims, natsjwt.key_pair(account_seed)), user


def test_user_jwt_round_trips_with_issuer_and_limits_written_out() -> None:
    account = natsjwt.new_seed("account")
    token, user = _user(account)
    back = natsjwt.decode(token)
    assert back.iss == natsjwt.public_of(account)
    assert back.sub == natsjwt.public_of(user)
    assert back.role == "user"
    assert isinstance(back.nats, natsjwt.User)
    assert back.nats.pub.allow == ("kb.status.site-a.*.*",)
    raw = _claims_json(token)["nats"]
    assert isinstance(raw, dict)
    # nats-server reads an absent limit as zero; they must be on the wire
    assert (raw["type"], raw["version"], raw["subs"], raw["payload"]) == ("user", 2, -1, -1)


def test_jti_is_nats_jwts_hash_of_the_standard_claims() -> None:
    token, _ = _user(natsjwt.new_seed("account"), exp=2_000_000_000)
    raw = _claims_json(token)
    standard = {k: raw[k] for k in ("exp", "iat", "iss", "name", "sub")}
    digest = hashlib.new("sha512_256", json.dumps(standard, separators=(",", ":")).encode()).digest()
    assert raw["jti"] == base64.b32encode(digest).decode().rstrip("=")


def test_operator_and_account_round_trip() -> None:
    operator, system, account = (natsjwt.new_seed(r) for r in ("operator", "account", "account"))
    op = natsjwt.encode(
        natsjwt.Claims(
            sub=natsjwt.public_of(operator),
            iss="",
            iat=0,
            nats=natsjwt.Operator(system_account=natsjwt.public_of(system)),
        ),
        natsjwt.key_pair(operator),
    )
    assert natsjwt.decode(op).role == "operator"
    acc = natsjwt.encode(
        natsjwt.Claims(
            sub=natsjwt.public_of(account),
            iss="",
            iat=0,
            nats=natsjwt.Account(limits={"conn": -1}, revocations={"UX": 5}),
        ),
        natsjwt.key_pair(operator),
    )
    back = natsjwt.decode(acc)
    assert isinstance(back.nats, natsjwt.Account)
    assert back.nats.revocations == {"UX": 5}


def test_a_changed_claim_breaks_the_signature() -> None:
    token, _ = _user(natsjwt.new_seed("account"))
    header, _payload, sig = token.split(".")
    raw = _claims_json(token)
    raw["nats"]["pub"]["allow"] = [">"]  # type: ignore[index]
    forged = base64.urlsafe_b64encode(json.dumps(raw).encode()).decode().rstrip("=")
    with pytest.raises(errors.JWTError, match="does not verify with its issuer"):
        natsjwt.decode(f"{header}.{forged}.{sig}")


def test_a_jwt_signed_by_another_key_than_its_issuer_is_refused() -> None:
    token, _ = _user(natsjwt.new_seed("account"))
    other, _ = _user(natsjwt.new_seed("account"))
    header, payload, _sig = token.split(".")
    with pytest.raises(errors.JWTError, match="does not verify"):
        natsjwt.decode(f"{header}.{payload}.{other.split('.')[2]}")


def test_a_user_jwt_signed_by_a_user_key_is_refused() -> None:
    user_signer = natsjwt.new_seed("user")
    token, _ = _user(user_signer)
    with pytest.raises(errors.JWTError, match="public key of an account"):
        natsjwt.decode(token)


def test_expired_jwt_is_refused_and_names_the_subject() -> None:
    token, user = _user(natsjwt.new_seed("account"), exp=int(time.time()) - 1)
    with pytest.raises(errors.JWTError, match=f"JWT of {natsjwt.public_of(user)} expired"):
        natsjwt.decode(token)
    assert natsjwt.decode(token, now=time.time() - 60).exp > 0


@pytest.mark.parametrize(
    ("token", "mentions"),
    [
        ("a.b", "three dot-separated parts"),
        ("e30.e30.AA", "alg is not ed25519-nkey"),
        (base64.urlsafe_b64encode(natsjwt.HEADER).decode().rstrip("=") + ".e30.AA", "JWT claims"),
    ],
)
def test_malformed_jwts_are_refused_by_name(token: str, mentions: str) -> None:
    with pytest.raises(errors.JWTError, match=mentions):
        natsjwt.decode(token)


@pytest.mark.parametrize(
    ("text", "mentions"),
    [
        ("not-base32!", "base32"),
        ("AAAA", "base32"),
        ("U" + "A" * 55, "bad checksum"),
        (natsjwt.public_of(natsjwt.new_seed("account")), "public key of a user"),
    ],
)
def test_bad_public_keys(text: str, mentions: str) -> None:
    with pytest.raises(errors.JWTError, match=mentions):
        natsjwt.public_key(text, "user")


def test_public_key_checksum() -> None:
    good = natsjwt.public_of(natsjwt.new_seed("user"))
    assert len(natsjwt.public_key(good, "user")) == 32
    raw = bytearray(base64.b32decode(good))
    raw[-1] ^= 1
    with pytest.raises(errors.JWTError, match="bad checksum"):
        natsjwt.public_key(base64.b32encode(bytes(raw)).decode(), "user")


def test_zero_user_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="subs=0"):
        natsjwt.User(subs=0)


def test_seed_errors_say_what_without_the_seed() -> None:
    with pytest.raises(errors.JWTError, match="not an NKey seed") as caught:
        natsjwt.key_pair("SUNOTASEED")
    assert "SUNOTASEED" not in str(caught.value)


def test_creds_file_holds_both_parts() -> None:
    token, user = _user(natsjwt.new_seed("account"))
    text = natsjwt.creds(token, user)
    assert token in text and user.decode() in text
    assert text.index("BEGIN NATS USER JWT") < text.index("BEGIN USER NKEY SEED")


def test_the_jwt_of_a_creds_file_and_a_file_that_is_none() -> None:
    token, user = _user(natsjwt.new_seed("account"))
    assert natsjwt.jwt_of_creds(natsjwt.creds(token, user)) == token
    with pytest.raises(errors.JWTError, match="no NATS USER JWT block"):
        natsjwt.jwt_of_creds(user.decode())
