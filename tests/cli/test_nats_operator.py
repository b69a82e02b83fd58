"""`kamaji-broker nats-config --auth operator`: the keys, JWTs and files of operator mode."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from common import natsoperator
from kamaji_broker import cli
from protocol import natsjwt

SEEDS = ("operator.nk", "operator-signing.nk", "system.nk", "account.nk", "account-signing.nk")


def _run(directory: Path) -> None:
    assert (
        cli.main(["nats-config", "--dir", str(directory), "--host", "127.0.0.1", "--auth", "operator"]) == 0
    )


def test_operator_mode_writes_keys_jwts_and_no_auth_conf(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path)
    keys = tmp_path / natsoperator.KEYS_DIR
    for seed in SEEDS:
        assert stat.S_IMODE((keys / seed).stat().st_mode) == 0o600, seed
    assert stat.S_IMODE((tmp_path / natsoperator.HUB_SYSTEM_CREDS).stat().st_mode) == 0o600
    assert not (tmp_path / "auth.conf").exists() and not (tmp_path / "hub.nk").exists()
    main = (tmp_path / "nats-server.conf").read_text()
    assert 'include "operator.conf"' in main and "type: full" in main and "allow_delete: false" in main
    operator = natsjwt.decode((keys / "operator.jwt").read_text())
    account = natsjwt.decode((keys / "account.jwt").read_text())
    assert isinstance(operator.nats, natsjwt.Operator) and isinstance(account.nats, natsjwt.Account)
    # the account is signed by the operator's signing key, as the hub signs its revocations
    assert account.iss == natsjwt.public_of((keys / "operator-signing.nk").read_bytes())
    assert account.iss in operator.nats.signing_keys
    assert account.nats.signing_keys == (natsjwt.public_of((keys / "account-signing.nk").read_bytes()),)
    assert account.nats.limits["disallow_bearer"] is True and account.nats.limits["disk_storage"] == -1
    included = (tmp_path / "operator.conf").read_text()
    assert operator.nats.system_account in included and account.sub in included
    err = capsys.readouterr().err
    assert "operator mode" in err and "offline" in err
    for seed in SEEDS:  # names the files, never their contents
        assert (keys / seed).read_text().strip() not in err


def test_a_second_run_keeps_every_key_and_jwt(tmp_path: Path) -> None:
    _run(tmp_path)
    before = {p.name: p.read_bytes() for p in (tmp_path / natsoperator.KEYS_DIR).iterdir()}
    creds = (tmp_path / natsoperator.HUB_SYSTEM_CREDS).read_bytes()
    _run(tmp_path)
    after = {p.name: p.read_bytes() for p in (tmp_path / natsoperator.KEYS_DIR).iterdir()}
    assert after == before
    assert (tmp_path / natsoperator.HUB_SYSTEM_CREDS).read_bytes() == creds


def test_a_damaged_seed_is_refused_by_file_without_its_contents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path)
    (tmp_path / natsoperator.KEYS_DIR / "account-signing.nk").write_text("SAGARBAGE\n")
    assert cli.main(["nats-config", "--dir", str(tmp_path), "--auth", "operator"]) == 2
    err = capsys.readouterr().err
    assert "account-signing.nk" in err and "SAGARBAGE" not in err
