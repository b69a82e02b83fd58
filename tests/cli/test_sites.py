"""`kamaji-broker site add|remove|list` and `nats-config`: files a real nats-server accepts."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import nkeys
import pytest

from common.files import natsserver
from kamaji_broker import cli
from sandbox import natsd


def valid(config: Path) -> bool:
    proc = subprocess.run(
        [natsd.find_binary(), "-c", str(config), "-t"], capture_output=True, text=True, check=False
    )
    return proc.returncode == 0 and "is valid" in proc.stdout + proc.stderr


def test_nats_config_writes_a_valid_server_config(tmp_path: Path) -> None:
    argv = [
        "nats-config",
        "--dir",
        str(tmp_path),
        "--port",
        "4333",
        "--host",
        "127.0.0.1",
        "--auth",
        "static",
    ]
    assert cli.main(argv) == 0
    main = tmp_path / "nats-server.conf"
    text = main.read_text()
    assert "jetstream" in text and 'include "auth.conf"' in text and "127.0.0.1:4333" in text
    assert stat.S_IMODE((tmp_path / "hub.nk").stat().st_mode) == 0o600
    hub_pub = (tmp_path / "hub.pub").read_text().strip()
    assert hub_pub in (tmp_path / "auth.conf").read_text()
    assert valid(main)


def test_site_add_writes_seed_and_permissions(tmp_path: Path) -> None:
    natsserver.nats_config(tmp_path, port=4334)
    assert cli.main(["site", "add", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    seed = (tmp_path / "sites" / "site-a.nk").read_bytes().strip()
    assert stat.S_IMODE((tmp_path / "sites" / "site-a.nk").stat().st_mode) == 0o600
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    auth = (tmp_path / "auth.conf").read_text()
    block = (tmp_path / "sites" / "site-a.conf").read_text()
    assert f'nkey: "{public}"' in block and f'nkey: "{public}"' in auth
    for allowed in (
        '"kb.status.site-a.*.*"',
        '"$JS.ACK.KB_INTENTS.agent-site-a.*.*.*.*.*"',
        '"_INBOX_site-a.>"',
    ):
        assert allowed in block
    assert seed.decode() not in auth  # the server gets public keys only
    assert valid(tmp_path / "nats-server.conf")


def test_site_add_is_idempotent(tmp_path: Path) -> None:
    natsserver.nats_config(tmp_path)
    first = natsserver.site_add(tmp_path, "site-a")
    auth = (tmp_path / "auth.conf").read_text()
    second = natsserver.site_add(tmp_path, "site-a")
    assert first == second
    assert (tmp_path / "auth.conf").read_text() == auth


@pytest.mark.parametrize("name", ["Site-A", "site.a", "site_a", "*", "a" * 64, ""])
def test_site_add_refuses_a_non_dns_name(
    tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["site", "add", name, "--nats-config-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "site name" in err and "DNS-1123" in err
    assert not (tmp_path / "sites").exists()


def test_site_list_and_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    natsserver.nats_config(tmp_path)
    a = natsserver.site_add(tmp_path, "site-a")
    b = natsserver.site_add(tmp_path, "site-b")
    assert cli.main(["site", "list", "--nats-config-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"site-a\t{a.public_key}", f"site-b\t{b.public_key}"]
    assert cli.main(["site", "remove", "site-a", "--nats-config-dir", str(tmp_path)]) == 0
    auth = (tmp_path / "auth.conf").read_text()
    assert a.public_key not in auth and b.public_key in auth
    assert not (tmp_path / "sites" / "site-a.nk").exists()
    assert [i.name for i in natsserver.site_list(tmp_path)] == ["site-b"]
    assert valid(tmp_path / "nats-server.conf")
    assert cli.main(["site", "remove", "site-a", "--nats-config-dir", str(tmp_path)]) == 2
    assert "not configured" in capsys.readouterr().err


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for command in ("hub", "agent", "sandbox", "site", "keys", "nats-config", "observer"):
        assert command in out


def test_bad_port_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["nats-config", "--dir", str(tmp_path), "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err
