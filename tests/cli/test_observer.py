"""``kamaji-broker observer`` and the observer's lifetime on files (the servers' side, revoking
in operator mode, is attacked in tests/security/test_observer_credential.py)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from common.files import natsserver, operator
from kamaji_broker import cli
from kamaji_broker.commands import status
from protocol import credentials, natsjwt
from tests import helpers


def _claims(conf: Path) -> natsjwt.Claims:
    return natsjwt.decode(helpers.creds_jwt(conf / natsserver.OBSERVER_CREDS), now=0)


def test_nats_config_gives_the_observer_the_lifetime_asked_for(tmp_path: Path) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path), "--observer-lifetime", "2h"]) == 0
    claims = _claims(tmp_path)
    assert claims.exp - claims.iat == 7200


def test_issue_signs_the_same_key_again_and_touches_nothing_else(tmp_path: Path) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path)]) == 0
    before = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != natsserver.OBSERVER_CREDS
    }
    key = _claims(tmp_path).sub
    assert cli.main(["observer", "issue", "--nats-config-dir", str(tmp_path), "--lifetime", "30m"]) == 0
    claims = _claims(tmp_path)
    assert claims.sub == key and claims.exp - claims.iat == 1800
    assert {p: p.read_bytes() for p in before} == before


def test_issue_refuses_a_lifetime_of_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path)]) == 0
    assert cli.main(["observer", "issue", "--nats-config-dir", str(tmp_path), "--lifetime", "0"]) == 2
    assert "a lifetime of at least a second" in capsys.readouterr().err


def test_static_users_have_no_lifetime_but_revoke_replaces_the_key_in_auth_conf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path), "--auth", "static"]) == 0
    assert cli.main(["observer", "issue", "--nats-config-dir", str(tmp_path)]) == 2
    assert "not in operator mode" in capsys.readouterr().err
    old = (tmp_path / "observer.pub").read_text().strip()
    assert old in (tmp_path / "auth.conf").read_text()
    assert cli.main(["observer", "revoke", "--nats-config-dir", str(tmp_path)]) == 0
    new = (tmp_path / "observer.pub").read_text().strip()
    auth = (tmp_path / "auth.conf").read_text()
    assert new != old and new in auth and old not in auth
    assert "reload the server" in capsys.readouterr().err


def test_revoke_in_operator_mode_needs_the_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path)]) == 0
    key = _claims(tmp_path).sub
    assert cli.main(["observer", "revoke", "--nats-config-dir", str(tmp_path)]) == 2
    assert "--nats-url is needed" in capsys.readouterr().err
    assert _claims(tmp_path).sub == key  # nothing changed


def test_status_says_plainly_that_the_observers_credential_expired(tmp_path: Path) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path)]) == 0
    keys = operator.Keys.load_or_create(tmp_path)
    seed = (tmp_path / natsserver.OBSERVER_SEED).read_bytes().strip()
    old = credentials.observer_user(
        natsjwt.public_of(seed),
        account=keys.account_public,
        now=dt.datetime.now(dt.UTC) - dt.timedelta(days=2),
    )
    expired = tmp_path / "expired.creds"
    expired.write_text(keys.user_creds(old, seed))
    said = status._expired(expired)
    assert "expired at" in said and "kamaji-broker observer issue" in said
    assert status._expired(tmp_path / natsserver.OBSERVER_CREDS) == ""
