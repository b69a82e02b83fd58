"""``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``: may I do this?

Answers from RBAC (``rbac.authorize``) for the requesting user (``authn.identify``: a token of
the server's token file, else the admin). Nothing is stored, as on the real server: the review
comes back with its ``status`` filled in. Talks to the ``store`` for the RBAC objects only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from sandbox.kubeapi import authn, errors
from sandbox.kubeapi.serving import calls, protobuf, rbac, responses
from sandbox.kubeapi.state import store

GROUP = "authorization.k8s.io"
KEY = (GROUP, "selfsubjectaccessreviews")


def objects(state: store.Store) -> rbac.Objects:
    def of(plural: str) -> tuple[Any, ...]:
        return tuple(e.obj for e in state.objects((rbac.GROUP, plural)).values())

    return rbac.Objects(of("roles"), of("clusterroles"), of("rolebindings"), of("clusterrolebindings"))


def attributes(spec: Mapping[str, Any]) -> rbac.Attributes:
    """The review's question: about a resource or a non-resource URL, exactly one (else 422)."""
    resource, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(resource, dict) and isinstance(other, dict):
        # The real server prints its Go struct: field names capitalised, no JSON tags.
        shown = json.dumps(
            {"Path": other.get("path", ""), "Verb": other.get("verb", "")}, separators=(",", ":")
        )
        raise _invalid(
            "spec.nonResourceAttributes",
            f"Invalid value: {shown}: cannot be specified in combination with resourceAttributes",
        )
    if isinstance(resource, dict):
        return rbac.Attributes(**{k: str(resource.get(k) or "") for k in (
            "verb", "group", "resource", "subresource", "namespace", "name")})  # fmt: skip
    if isinstance(other, dict):
        return rbac.Attributes(verb=str(other.get("verb") or ""), path=str(other.get("path") or ""))
    raise _invalid(
        "spec.resourceAttributes",
        "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified",
    )


def _invalid(path: str, message: str) -> errors.ApiError:
    """422 as the real server words it: a review has no kind nor name in its Status details."""
    return errors.invalid("", "", [errors.Cause("FieldValueInvalid", message, path)], group=GROUP)


async def create(request: web.Request, state: store.Store, users: Mapping[str, authn.User]) -> web.Response:
    raw = await request.read()
    body = protobuf.decode(raw) if request.content_type == protobuf.CONTENT_TYPE else calls.decode(raw)
    if not isinstance(body, dict):
        raise errors.bad_request("the request body must be a JSON object")
    spec = body.get("spec") or {}
    caller = authn.identify(users, request.headers.get("Authorization", ""))
    try:
        user = authn.impersonated(
            caller,
            request.headers.get("Impersonate-User", ""),
            request.headers.getall("Impersonate-Group", []),
        )
    except PermissionError as exc:
        raise errors.forbidden("users", "", str(exc)) from None
    allowed, reason = rbac.authorize(user, attributes(spec), objects(state))
    status: dict[str, Any] = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    review = {
        "kind": "SelfSubjectAccessReview",
        "apiVersion": f"{GROUP}/v1",
        "metadata": {"creationTimestamp": None},
        "spec": spec,
        "status": status,
    }
    return responses.respond_json(review, status=201)
