"""Names that carry NATS subject syntax or whitespace are refused by every
checker, with an error naming the field and the name.

``re.match`` with a pattern ending in ``$`` accepted ``site-c\\n`` (Python's ``$`` also matches
before a final newline): `site add $'site-c\\n'` wrote an ``auth.conf`` that nats-server
refuses, and ``hub.api.machinery.dns1035_label`` took ``cp1\\n`` for a TenantControlPlane name. Each
name below is tried on each checker: the subject builders and parser, ``labels.check``, the
site permissions, `kamaji-broker site add`, the hub's API validators and the agent's ``--site``,
and the Kubernetes emulator's name and schema-pattern validation (which must refuse what a real
API server refuses, whose Go regexps read ``$`` as the end of the text).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import pydantic
import pytest

from agent import settings as agent_settings
from common.files import natsserver
from hub.api import machinery, rkcp
from kamaji_broker import cli
from protocol import errors, labels, messages, permissions, subjects
from sandbox import natsd
from sandbox.kubeapi.kinds import formats, resources, schema
from sandbox.kubeapi.state import admission
from tests import helpers

BAD = {
    "trailing-newline": "site-c\n",
    "trailing-crlf": "site-c\r\n",
    "leading-newline": "\nsite-c",
    "inner-newline": "site\nc",
    "dot": "site.c",
    "star": "*",
    "star-token": "site-*",
    "gt": ">",
    "gt-token": "site>",
    "space": "site c",
    "trailing-space": "site-c ",
    "tab": "site\tc",
    "trailing-tab": "site-c\t",
    "nul": "site-c\x00",
    "empty": "",
}
"""Only the names ending in one newline passed the former checks; the others are the cases
that already held, kept so that they keep holding."""


def refused_by_labels(name: str, _: Path) -> None:
    assert labels.problem(name) is not None
    with pytest.raises(errors.SubjectError, match=re.escape(f"site {name!r} is not a DNS-1123 label")):
        labels.check(name, field="site")


def refused_by_subject_builders(name: str, _: Path) -> None:
    builders: tuple[Callable[[], str], ...] = (
        lambda: subjects.intent(name, "tenants", "cp1"),
        lambda: subjects.status("site-a", name, "cp1"),
        lambda: subjects.secret("site-a", "tenants", name),
        lambda: subjects.heartbeat(name),
        lambda: subjects.site_filter(subjects.Kind.STATUS, name),
    )
    for build in builders:
        with pytest.raises(errors.SubjectError, match="is not a DNS-1123 label"):
            build()
    if "." not in name:  # a dotted prefix (acme.kb) is allowed: each of its tokens is checked
        with pytest.raises(errors.SubjectError, match="subject prefix token"):
            subjects.check_prefix(name)


def refused_by_subject_parser(name: str, _: Path) -> None:
    with pytest.raises(errors.SubjectError, match="subject"):
        subjects.parse(f"kb.status.{name}.tenants.cp1")


def refused_by_permissions(name: str, _: Path) -> None:
    with pytest.raises(errors.SubjectError, match="is not a DNS-1123 label"):
        permissions.for_site(name)
    with pytest.raises(errors.SubjectError, match="is not a DNS-1123 label"):
        permissions.site_inbox_prefix(name)


def refused_by_site_add(name: str, tmp_path: Path) -> None:
    natsserver.nats_config(tmp_path, port=4399)
    auth = (tmp_path / "auth.conf").read_text()
    with pytest.raises(errors.SubjectError, match=re.escape(f"site name {name!r} is not a DNS-1123 label")):
        natsserver.site_add(tmp_path, name)
    assert (tmp_path / "auth.conf").read_text() == auth
    assert not (tmp_path / "sites").exists() or not any((tmp_path / "sites").iterdir())


def refused_by_hub_validators(name: str, _: Path) -> None:
    assert not machinery.dns1123_label(name)
    assert not machinery.dns1035_label(name)
    for field, value in (("site", name), ("targetNamespace", name), ("tenantControlPlaneName", name)):
        spec = {"site": "site-a", "version": "v1.31.0", field: value}
        with pytest.raises(pydantic.ValidationError) as exc:
            rkcp.Spec.model_validate(spec)
        assert [e["loc"] for e in exc.value.errors()] == [(field,)]


def refused_by_agent_settings(name: str, tmp_path: Path) -> None:
    keys = tmp_path / "hub-public-keys.json"
    keys.write_text("{}")
    with pytest.raises(pydantic.ValidationError) as exc:
        agent_settings.AgentSettings(site=name, nats_url="nats://127.0.0.1:4222", hub_public_keys=keys)
    assert [e["loc"] for e in exc.value.errors()] == [("site",)]


def refused_by_the_emulator(name: str, _: Path) -> None:
    namespaces = next(t for t in resources.builtins() if t.plural == "namespaces")
    assert admission.name_causes(namespaces, name) != []
    site_schema = {"type": "object", "properties": {"site": {"type": "string", "pattern": labels.PATTERN}}}
    assert [c.field for c in schema.validate({"site": name}, site_schema)] == ["site"]


def refused_by_the_wire_decoders(name: str, _: Path) -> None:
    # Every field of a message that is a subject token is a Label: a body naming one of these is
    # not a message at all (msgspec searches with Python's re, whose "$" passed "cp1\n").
    for field in ("site", "namespace", "name"):
        raw = msgspec.json.decode(messages.encode(helpers.status()))
        raw[field] = name
        with pytest.raises(errors.DecodeError, match=f"at `\\$.{field}`"):
            messages.decode_status(msgspec.json.encode(raw))


CHECKERS: dict[str, Callable[[str, Path], None]] = {
    "labels": refused_by_labels,
    "subject-builders": refused_by_subject_builders,
    "subject-parser": refused_by_subject_parser,
    "permissions": refused_by_permissions,
    "site-add": refused_by_site_add,
    "hub-api": refused_by_hub_validators,
    "agent-settings": refused_by_agent_settings,
    "emulator": refused_by_the_emulator,
    "wire-decoders": refused_by_the_wire_decoders,
}


@pytest.mark.parametrize("checker", CHECKERS)
@pytest.mark.parametrize("name", [pytest.param(v, id=k) for k, v in BAD.items()])
def test_every_checker_refuses_the_name(name: str, checker: str, tmp_path: Path) -> None:
    CHECKERS[checker](name, tmp_path)


def test_site_add_refuses_a_trailing_newline_and_the_server_config_stays_valid(tmp_path: Path) -> None:
    """The attack end to end: `kamaji-broker site add $'site-c\\n'` as a process."""
    natsserver.nats_config(tmp_path, port=4398)
    natsserver.site_add(tmp_path, "site-a")
    before = (tmp_path / "auth.conf").read_text()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kamaji_broker.cli",
            "site",
            "add",
            "site-c\n",
            "--nats-config-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "site name 'site-c\\n' is not a DNS-1123 label" in out.stderr
    assert (tmp_path / "auth.conf").read_text() == before
    assert sorted(p.name for p in (tmp_path / "sites").iterdir()) == [
        "site-a.conf",
        "site-a.nk",
        "site-a.pub",
    ]
    check = subprocess.run(
        [natsd.find_binary(), "-c", str(tmp_path / "nats-server.conf"), "-t"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("name", ["site-c\n", "site.c", "site c"])
def test_cli_site_add_names_the_field(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["site", "add", name, "--nats-config-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"site name {name!r} is not a DNS-1123 label" in err
    assert not (tmp_path / "sites").exists()


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"^[a-z]+$", r"^[a-z]+\Z"),
        (r"^a[$]b$", r"^a[$]b\Z"),  # inside a class, '$' is a character
        (r"^a\$$", r"^a\$\Z"),  # escaped, too
        (r"^(a|b$)c$", r"^(a|b\Z)c\Z"),
        (r"^[a-z]+", r"^[a-z]+"),
    ],
)
def test_the_emulator_reads_dollar_as_the_end_of_the_text(pattern: str, expected: str) -> None:
    assert formats.end_of_text(pattern) == expected
