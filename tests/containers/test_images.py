"""The images one at a time, through testcontainers' DockerContainer: what each holds, and that
each runs hardened (non-root, read-only root, no capabilities) on its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import nats
import pytest
from testcontainers.core.container import DockerContainer

from sandbox import ports
from tests import helpers

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

HARDENED: dict[str, Any] = {
    "read_only": True,
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
}


@contextmanager
def running(
    image: str, command: str, *, tmpfs: tuple[str, ...] = (), **kwargs: Any
) -> Iterator[DockerContainer]:
    container = DockerContainer(image, command=command, **HARDENED, **kwargs)
    for path in tmpfs:
        container.with_tmpfs_mount(path)
    container.start()
    try:
        yield container
    finally:
        container.stop()  # removes it (and its anonymous volumes)


def finished(container: DockerContainer) -> tuple[int, str]:
    code = container.get_wrapped_container().wait(timeout=120)["StatusCode"]
    out, err = container.get_logs()
    return int(code), (out + err).decode(errors="replace")


def test_the_runtime_image_writes_only_where_it_is_given_a_volume(built: dict[str, str]) -> None:
    with running(built["runtime"], "keys generate --out /tmp/keys", network_mode="none") as container:
        code, logs = finished(container)
        assert code == 1, logs
        assert logs.strip() == "kamaji-broker keys: error: /tmp/keys: Read-only file system"
    with running(
        built["runtime"], "keys generate --out /tmp/keys", network_mode="none", tmpfs=("/tmp",)
    ) as container:
        code, logs = finished(container)
        assert code == 0, logs
        assert "created /tmp/keys/signing.key" in logs
        assert container.get_wrapped_container().attrs["Config"]["User"] == "10001:10001"


@pytest.mark.parametrize(
    ("image", "has_nats_server"), [("runtime", False), ("sandbox", True)], ids=["runtime", "sandbox"]
)
def test_only_the_sandbox_image_carries_nats_server(
    built: dict[str, str], image: str, has_nats_server: bool
) -> None:
    script = "import shutil, os; print(shutil.which('nats-server') is not None, os.getuid())"
    with running(built[image], "", entrypoint=["python", "-c", script], network_mode="none") as container:
        code, logs = finished(container)
        assert code == 0, logs
        assert logs.split() == [str(has_nats_server), "10001"]


async def test_the_nats_image_serves_jetstream_to_a_client_on_the_host(images: dict[str, str]) -> None:
    """The NATS image compose runs (the official one, or engine.sh's), read-only, on 127.0.0.1."""
    port = ports.free_port()
    command = f"nats-server --addr 127.0.0.1 --port {port} --jetstream --store_dir /tmp/js"
    with running(images["KB_NATS_IMAGE"], command, network_mode="host", tmpfs=("/tmp",)) as container:
        client = await helpers.eventually(
            lambda: _connect(port), within=60, every=0.2, what=f"{images['KB_NATS_IMAGE']} on {port}"
        )
        try:
            js = client.jetstream()
            await js.add_stream(name="probe", subjects=["probe.>"])
            ack = await js.publish("probe.one", b"kept")
            message = await js.get_msg("probe", ack.seq)
            assert message.data == b"kept"
        finally:
            await client.close()
        assert container.get_wrapped_container().attrs["HostConfig"]["ReadonlyRootfs"] is True


async def _connect(port: int) -> Any:
    try:
        return await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False, connect_timeout=1)
    except (TimeoutError, OSError, nats.errors.NoServersError):
        return None
