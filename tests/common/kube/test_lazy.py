"""common.kube.lazy: kubernetes_asyncio's generated classes load only when something asks for them.

Each case runs in a fresh interpreter: in this one the library may have been imported whole
already (the emulator's contract tests use its typed APIs).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("entry", ["common.kube", "hub.main", "agent.main", "kamaji_broker.cli"])
def test_importing_a_process_loads_none_of_the_generated_classes(entry: str) -> None:
    out = run(
        f"""
        import sys
        import {entry}
        loaded = [m for m in sys.modules if m.startswith("kubernetes_asyncio.client.")]
        print(len(loaded), "kubernetes_asyncio.client.api" in sys.modules,
              "V1Pod" in vars(sys.modules["kubernetes_asyncio.client.models"]))
        """
    )
    count, api, model = out.split()
    assert (api, model) == ("False", "False")
    assert int(count) < 10


@pytest.mark.parametrize(
    "asked",
    [
        "from kubernetes_asyncio import client; print(client.CoreV1Api.__name__)",
        "from kubernetes_asyncio.client import CoreV1Api; print(CoreV1Api.__name__)",
        "import kubernetes_asyncio.client.models as m; print(m.V1Pod.__name__)",
        "import kubernetes_asyncio; print(kubernetes_asyncio.watch.Watch.__name__)",
        "from kubernetes_asyncio import config; print(config.load_config.__name__)",
        "import kubernetes_asyncio; print(kubernetes_asyncio.__project__)",
    ],
)
def test_what_is_asked_for_later_is_there(asked: str) -> None:
    assert run(f"import common.kube\n{asked}") in {
        "CoreV1Api",
        "V1Pod",
        "Watch",
        "load_config",
        "kubernetes_asyncio",
    }


def test_the_api_client_still_turns_answers_into_models() -> None:
    out = run(
        """
        import asyncio, json
        import common.kube
        from kubernetes_asyncio.client import ApiClient

        class Answer:
            data = json.dumps({"metadata": {"name": "p"}, "spec": {"containers": []}})

        async def main():
            async with ApiClient() as api:
                print(api.deserialize(Answer(), "V1Pod").metadata.name)

        asyncio.run(main())
        """
    )
    assert out == "p"


def test_a_library_imported_before_is_left_as_it_is() -> None:
    out = run(
        """
        import sys, types
        import kubernetes_asyncio
        from common.kube import lazy
        print(lazy.install(), type(sys.modules["kubernetes_asyncio.client"]) is types.ModuleType)
        """
    )
    assert out == "False True"


def test_threads_asking_at_once_all_get_the_name() -> None:
    out = run(
        """
        import threading
        import common.kube
        from kubernetes_asyncio import client

        got, failed = [], []

        def ask():
            try:
                got.append(client.CoreV1Api.__name__)
            except AttributeError as exc:
                failed.append(str(exc))

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(len(got), failed)
        """
    )
    assert out == "8 []"


def test_a_name_patched_before_the_package_loads_stays_patched() -> None:
    out = run(
        """
        from unittest import mock
        import common.kube
        with mock.patch("kubernetes_asyncio.config.load_incluster_config") as patched:
            import kubernetes_asyncio.watch  # loads the config package's __init__
            from kubernetes_asyncio import config
            print(config.load_incluster_config is patched, config.load_config.__name__)
        """
    )
    assert out == "True load_config"
