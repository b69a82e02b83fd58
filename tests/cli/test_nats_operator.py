"""`kamaji-broker nats-config --auth operator`: the keys, JWTs and files of operator mode."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from common.files import operator as natsoperator
from hub.api import site as site_api
from hub.credentials import operator as operatormode
from kamaji_broker import cli
from protocol import natsjwt
from tests import helpers

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


def test_site_add_in_operator_mode_makes_a_bootstrap_credential_and_changes_no_server_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path)
    server_files = {p: p.read_bytes() for p in (tmp_path / "nats-server.conf", tmp_path / "operator.conf")}
    assert (
        cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path), "--bootstrap-lifetime", "2h"])
        == 0
    )
    boot = tmp_path / "sites" / "site-a.bootstrap.creds"
    assert stat.S_IMODE(boot.stat().st_mode) == 0o600
    claims = natsjwt.decode(helpers.creds_jwt(boot))
    assert claims.name == "bootstrap:site-a" and claims.exp - claims.iat == 7200
    assert isinstance(claims.nats, natsjwt.User) and claims.nats.pub.allow == ("kb.bootstrap.site-a",)
    assert claims.iss == natsjwt.public_of(
        (tmp_path / natsoperator.KEYS_DIR / "account-signing.nk").read_bytes()
    )
    site = yaml.safe_load((tmp_path / "sites" / "site-a.site.yaml").read_text())
    # the one credential older than the Site that the hub takes, and revokes with the Site
    assert site["metadata"]["annotations"] == {site_api.BOOTSTRAP_ANNOTATION: helpers.creds_jwt(boot)}
    assert {p: p.read_bytes() for p in server_files} == server_files
    assert not (tmp_path / "auth.conf").exists()
    err = capsys.readouterr().err
    assert "Nothing changes on the NATS servers" in err and "reload" not in err
    assert cli.main(["site", "remove", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    assert not boot.exists()
    assert "the hub revokes the site's agent when its Site is deleted" in capsys.readouterr().err


def test_the_hub_directory_holds_what_the_hub_needs_only(tmp_path: Path) -> None:
    _run(tmp_path)
    hub = tmp_path / natsoperator.HUB_DIR
    assert sorted(p.name for p in hub.iterdir()) == sorted(operatormode.FILES)
    for name in ("account-signing.nk", "operator-signing.nk", "system.creds"):
        assert stat.S_IMODE((hub / name).stat().st_mode) == 0o600, name
    assert (
        operatormode.load(hub).authority.account == natsoperator.Keys.load_or_create(tmp_path).account_public
    )
