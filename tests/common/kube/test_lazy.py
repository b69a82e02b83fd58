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


def test_importing_the_seam_loads_none_of_the_generated_classes() -> None:
    out = run(
        """
        import sys
        import common.kube
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
    ],
)
def test_what_is_asked_for_later_is_there(asked: str) -> None:
    assert run(f"import common.kube\n{asked}") in {"CoreV1Api", "V1Pod", "Watch", "load_config"}


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
