"""hub.settings: where the hub watches (--namespace, --namespaces, --all-namespaces) and what
(--watch-filter), parsed from the command line as ``kamaji-broker hub`` parses it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hub.controllers import deps
from hub.settings import HubSettings
from kamaji_broker import cli, flags


@pytest.fixture
def base(tmp_path: Path) -> list[str]:
    for name in ("signing.key", "hub.nk", "kubeconfig"):
        (tmp_path / name).write_text("x\n")
    (tmp_path / "sealing").mkdir()
    (tmp_path / "sealing" / "a.key").write_text("x\n")
    return [
        "hub", "--nats-url", "tls://nats:4222", f"--nats-seed={tmp_path / 'hub.nk'}",
        f"--kubeconfig={tmp_path / 'kubeconfig'}", f"--signing-key={tmp_path / 'signing.key'}",
        f"--sealing-keys={tmp_path / 'sealing'}",
    ]  # fmt: skip


def _load(argv: list[str]) -> HubSettings:
    return flags.load(HubSettings, cli._parser().parse_args(argv))


SCOPES = [
    ("--namespace", ["--namespace=team-a"], ("team-a",)),
    ('--namespace given empty: all, as providers\' --namespace=""', ["--namespace="], ()),
    ("--namespaces", ["--namespaces=b,a"], ("a", "b")),
    ("--all-namespaces", ["--all-namespaces"], ()),
]


@pytest.mark.parametrize(("argv", "watched"), [s[1:] for s in SCOPES], ids=[s[0] for s in SCOPES])
def test_where_the_hub_watches(base: list[str], argv: list[str], watched: tuple[str, ...]) -> None:
    settings = _load(base + argv)
    assert settings.watch_namespaces == watched
    assert deps.Settings.of(settings).namespaces == watched


REFUSED = [
    ("none", [], "give exactly one of --namespace NS, --namespaces a,b or --all-namespaces"),
    ("two ways", ["--namespace=a", "--all-namespaces"], "give exactly one of --namespace NS"),
    ("empty and a list", ["--namespace=", "--namespaces=a"], "give exactly one of --namespace NS"),
    ("not a label", ["--namespace=Team_A"], "--namespace: namespace 'Team_A' is not a DNS-1123"),
    (
        "bad filter",
        ["--all-namespaces", "--watch-filter=-x"],
        "--watch-filter: '-x' is not a label",
    ),
    ("long filter", ["--all-namespaces", f"--watch-filter={'a' * 64}"], "is not a label value"),
]


@pytest.mark.parametrize(("argv", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_refused_naming_the_flag(base: list[str], argv: list[str], message: str) -> None:
    with pytest.raises(flags.SettingsError) as e:
        _load(base + argv)
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("argv", "selector"),
    [
        ([], None),
        (["--watch-filter="], None),
        (["--watch-filter=team-a.v1"], "cluster.x-k8s.io/watch-filter=team-a.v1"),
    ],
)
def test_watch_filter_becomes_the_label_selector(
    base: list[str], argv: list[str], selector: str | None
) -> None:
    settings = _load([*base, "--all-namespaces", *argv])
    assert deps.Settings.of(settings).label_selector == selector


def test_the_environment_says_it_too(base: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_HUB_NAMESPACE", "team-b")
    monkeypatch.setenv("KB_HUB_WATCH_FILTER", "blue")
    settings = _load(base)
    assert settings.watch_namespaces == ("team-b",) and settings.watch_filter == "blue"
