"""HTTP responses of the API: JSON bodies, and errors as ``metav1.Status``.

Owns how every answer is built (always JSON, as the emulator serves no protobuf responses) and
the one place where ``errors.ApiError`` meets HTTP. Used by ``handlers``, ``writing`` and
``deleting``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from aiohttp import web

from sandbox.kubeapi import errors

JSON = "application/json"


def respond(body: bytes, *, status: int = 200, content_type: str = JSON) -> web.Response:
    return web.Response(body=body, status=status, headers={"Content-Type": content_type})


def respond_json(obj: Any, *, status: int = 200) -> web.Response:
    return respond(msgspec.json.encode(obj), status=status)


def error_response(error: errors.ApiError) -> web.Response:
    return respond_json(error.status(), status=error.code)


def not_found_path() -> errors.ApiError:
    return errors.ApiError(404, "NotFound", "the server could not find the requested resource")
