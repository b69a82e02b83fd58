"""One resource request, resolved, and what the verbs read from it.

Owns ``Call`` (the aiohttp request with its routing target, resource type and the rendering it
asked for) and the decoding of what a request carries: JSON, YAML or protobuf bodies, the write
options (dryRun, fieldValidation and the warnings the write collects for the ``Warning``
headers), and the label and field selectors. Used by ``handlers``, ``writing`` and
``deleting``; raises ``errors.ApiError``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import yaml
from aiohttp import web

from sandbox.kubeapi import errors, options
from sandbox.kubeapi.kinds import resources
from sandbox.kubeapi.serving import protobuf, rendering, routing
from sandbox.kubeapi.state import selectors, watching

#: The warnings of a request's write, sent back as ``Warning: 299`` headers.
WARNINGS = web.RequestKey("warnings", list[str])


@dataclass(frozen=True)
class Call:
    """A request for a served resource: what it asks for and how it wants the answer."""

    request: web.Request
    target: routing.Target
    rtype: resources.ResourceType
    view: rendering.View

    @property
    def namespace(self) -> str:
        return self.target.namespace or ""

    @property
    def name(self) -> str:
        return self.target.name

    def write(self) -> options.Write:
        """dryRun and fieldValidation of a write, and the request's list that collects its warnings."""
        agent = self.request.headers.get("User-Agent", "")
        return options.write(self.request.query, self.request.setdefault(WARNINGS, []), user_agent=agent)

    def filter(self) -> watching.Filter:
        """The namespace and the label and field selectors of a list, watch or deletecollection."""
        query = self.request.query
        labels = selectors.parse_labels(query.get("labelSelector", ""))
        fields = selectors.parse_fields(query.get("fieldSelector", ""), supported=self.rtype.field_selectors)
        if self.target.name:  # the legacy /watch/<resource>/<name> form
            fields = selectors.FieldSelector(
                (
                    *fields.requirements,
                    selectors.FieldRequirement(("metadata", "name"), self.target.name, False),
                )
            )
        return watching.Filter(self.rtype.key, self.target.namespace, labels, fields)

    async def body(self) -> dict[str, Any]:
        """The request's object: protobuf, JSON or YAML by Content-Type; 400 unless an object."""
        raw = await self.request.read()
        content_type = self.request.content_type
        if content_type == protobuf.CONTENT_TYPE:
            return protobuf.decode(raw)
        body = decode(raw, yaml_ok=content_type in ("application/yaml", "application/x-yaml"))
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        return body


def decode(raw: bytes, *, yaml_ok: bool = False) -> Any:
    """A JSON (or, with ``yaml_ok``, YAML) document; 400 when it does not decode."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        if (
            not yaml_ok
        ):  # YAML bodies are mostly JSON (kubectl sends JSON as apply-patch+yaml): try that first
            raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc
