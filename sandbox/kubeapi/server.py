"""``Server``: one emulated cluster (on 127.0.0.1 unless told), with its kubeconfig and CRD loading.

Owns the aiohttp application and its lifecycle (start on a given or random port, stop cleanly
ending every watch), the kubeconfig file, and the helpers that load CRDs into the cluster
without going through HTTP. Each Server has its own ``store.Store``; run several for several
clusters.
"""

from __future__ import annotations

import collections
import copy
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from sandbox.kubeapi import authn, errors, options
from sandbox.kubeapi.serving import handlers
from sandbox.kubeapi.state import objects, store

Request = handlers.Request


class Server:
    """An emulated Kubernetes API server for one cluster.

    ``history`` bounds the watch window (events kept for resuming watches and paginated lists);
    ``watch_queue`` bounds the events queued for one slow watcher before it is cut off.
    ``token_auth_file`` (kube-apiserver's ``--token-auth-file`` CSV) names users by bearer token,
    for SelfSubjectAccessReviews; without it, and for any other token, the caller is the admin.
    """

    def __init__(
        self,
        name: str = "sandbox",
        *,
        history: int = 10_000,
        watch_queue: int = 10_000,
        bookmark_interval: float = 10.0,
        token_auth_file: Path | None = None,
    ) -> None:
        self.name = name
        self.store = store.Store(history=history, watch_queue=watch_queue)
        users = (
            authn.parse_token_file(token_auth_file.read_text(), source=str(token_auth_file))
            if token_auth_file
            else {}
        )
        self.settings = options.Settings(bookmark_interval=bookmark_interval, users=users)
        self._handler = handlers.Handler(self.store, self.settings)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.host = "127.0.0.1"
        """Where clients reach it: the address it listens on, or 127.0.0.1 for every address."""

    @property
    def requests(self) -> collections.Counter[Request]:
        """Every resource request this server received, counted by (method, plural, namespace,
        name): which calls a client made, seen from the server (a test's evidence, not a metric)."""
        return self._handler.requests

    @property
    def url(self) -> str:
        if not self.port:
            raise RuntimeError("the server is not started")
        return f"http://{self.host}:{self.port}"

    async def start(self, port: int = 0, *, host: str = "127.0.0.1") -> None:
        """Listen on ``host``:``port`` (0 picks a free port; read it from ``url``, which is on
        ``host``, or on 127.0.0.1 for every address: a container publishes it there)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handler.handle)
        # handler_cancellation: a watch whose client went away is cancelled at once, so its
        # watcher is released instead of waiting for the next event to fail.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        self.host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        self._handler.address = f"{self.host}:{self.port}"

    async def stop(self) -> None:
        """End every watch stream, then close the listener and open connections."""
        self.store.history.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def kubeconfig(self, *, token: str = "sandbox") -> dict[str, Any]:
        """A kubeconfig for this server; ``token``: a user of the token auth file (default: admin)."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": self.name, "cluster": {"server": self.url}}],
            "users": [{"name": self.name, "user": {"token": token}}],
            "contexts": [
                {
                    "name": self.name,
                    "context": {"cluster": self.name, "user": self.name, "namespace": "default"},
                }
            ],
            "current-context": self.name,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | Path, *, token: str = "sandbox") -> Path:
        """Write a kubeconfig (context named after the server) to ``path``; returns the Path."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(token=token), sort_keys=False))
        return target

    async def service_account_kubeconfig(self, *, namespace: str, name: str, path: Path) -> Path:
        """Write at ``path`` a kubeconfig of ServiceAccount ``namespace/name``: a new bearer token
        that this server knows as that account from now on, as a token from a real server's
        TokenRequest API is (the same call as ``realkube.Cluster``'s); return ``path``. The
        ServiceAccount must exist (``ApiError`` 404 otherwise)."""
        self.store.get(self.store.types[("", "serviceaccounts")], namespace, name)
        token = secrets.token_urlsafe(24)
        self.settings.users[token] = authn.service_account(namespace, name)
        return self.write_kubeconfig(path, token=token)

    async def apply_crd(self, crd: dict[str, Any]) -> dict[str, Any]:
        """Create or replace a CustomResourceDefinition; returns the stored CRD."""
        return self.apply_crd_now(crd)

    def apply_crd_now(self, crd: dict[str, Any]) -> dict[str, Any]:
        """``apply_crd`` for synchronous callers (before ``start``, or from the event loop thread)."""
        rtype = self.store.types[objects.CRDS]
        body = copy.deepcopy(crd)
        name = (body.get("metadata") or {}).get("name", "")
        try:
            entry = self.store.create(rtype, "", body, version="v1")
        except errors.ApiError as exc:
            if exc.reason != "AlreadyExists":
                raise
            body = copy.deepcopy(crd)
            body.setdefault("metadata", {}).pop("resourceVersion", None)
            entry = self.store.update(rtype, "", name, body, version="v1")
        return entry.obj

    def apply_crd_files(self, paths: Iterable[str | Path]) -> list[dict[str, Any]]:
        """Load every CRD document of the given YAML files (synchronous: small local files)."""
        applied = []
        for path in paths:
            for doc in yaml.safe_load_all(Path(path).read_text()):
                if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                    applied.append(self.apply_crd_now(doc))
        return applied
