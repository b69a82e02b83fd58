"""sandbox.kubeapi.kinds.schema, pruning, formats: structural-schema pruning, defaulting, validation (pure),
and the same validation table through the API of each backend (a CRD of ``SCHEMA``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sandbox.kubeapi.kinds import formats, pruning, schema
from tests.sandbox.kubeapi import backends

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8, "minLength": 2},
                "mode": {"type": "string", "enum": ["A", "B"], "default": "A"},
                "count": {"type": "integer", "minimum": 1, "maximum": 5},
                "ratio": {"type": "number", "exclusiveMinimum": True, "minimum": 0},
                "port": {
                    "x-kubernetes-int-or-string": True,
                    "anyOf": [{"type": "integer"}, {"type": "string"}],
                },
                "when": {"type": "string", "format": "date-time"},
                "ip": {"type": "string", "format": "ipv4"},
                "maybe": {"type": "string", "nullable": True},
                "tags": {
                    "type": "array",
                    "items": {"type": "string"},
                    "maxItems": 2,
                    "x-kubernetes-list-type": "set",
                },
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["name"],
                    "items": {
                        "type": "object",
                        "required": ["name"],  # a map key must be required (or defaulted)
                        "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    },
                },
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "nested": {
                    "type": "object",
                    "default": {},
                    "properties": {"inner": {"type": "boolean", "default": True}},
                },
                "flag": {"type": "boolean"},
                "i32": {"type": "integer", "format": "int32"},
                "odd": {"type": "integer", "not": {"multipleOf": 2}},
                "choice": {"type": "string", "oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]},
                "both": {"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]},
            },
        },
        "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
    },
}


def _causes(spec: dict[str, Any]) -> list[tuple[str, str, str]]:
    obj = {"apiVersion": "x/v1", "kind": "X", "metadata": {"name": "n"}, "spec": spec}
    return [(c.field, c.reason, c.message) for c in schema.validate(obj, SCHEMA)]


VALIDATE_CASES = [
    ({"name": "ok"}, []),
    ({}, [("spec.name", "FieldValueRequired", "Required value")]),
    (
        {"name": 5},
        [
            (
                "spec.name",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.name in body must be of type string: "integer"',
            )
        ],
    ),
    (
        {"name": "Abc"},
        [
            (
                "spec.name",
                "FieldValueInvalid",
                "Invalid value: \"Abc\": spec.name in body should match '^[a-z]+$'",
            )
        ],
    ),
    (
        {"name": "abcdefghi"},
        [("spec.name", "FieldValueTooLong", "Too long: may not be more than 8 bytes")],
    ),
    (
        {"name": "a"},
        [
            (
                "spec.name",
                "FieldValueInvalid",
                'Invalid value: "a": spec.name in body should be at least 2 chars long',
            )
        ],
    ),
    (
        {"name": "ok", "mode": "C"},
        [("spec.mode", "FieldValueNotSupported", 'Unsupported value: "C": supported values: "A", "B"')],
    ),
    (
        {"name": "ok", "count": 0},
        [
            (
                "spec.count",
                "FieldValueInvalid",
                "Invalid value: 0: spec.count in body should be greater than or equal to 1",
            )
        ],
    ),
    (
        {"name": "ok", "count": 6},
        [
            (
                "spec.count",
                "FieldValueInvalid",
                "Invalid value: 6: spec.count in body should be less than or equal to 5",
            )
        ],
    ),
    ({"name": "ok", "count": 2.0}, []),
    (
        {"name": "ok", "count": 2.5},
        [
            (
                "spec.count",
                "FieldValueTypeInvalid",
                'Invalid value: "number": spec.count in body must be of type integer: "number"',
            ),
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": Checked value must be of type integer (default format) in spec.count',
            ),
        ],
    ),
    (
        {"name": "ok", "count": True},
        [
            (
                "spec.count",
                "FieldValueTypeInvalid",
                'Invalid value: "boolean": spec.count in body must be of type integer: "boolean"',
            )
        ],
    ),
    (
        {"name": "ok", "ratio": 0},
        [
            (
                "spec.ratio",
                "FieldValueInvalid",
                "Invalid value: 0: spec.ratio in body should be greater than 0",
            )
        ],
    ),
    ({"name": "ok", "port": 80}, []),
    ({"name": "ok", "port": "http"}, []),
    (
        {"name": "ok", "port": [1]},
        [
            (
                "spec.port",
                "FieldValueTypeInvalid",
                'Invalid value: "array": spec.port in body must be of type integer,string: "array"',
            ),
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": "spec.port" must validate at least one schema (anyOf)',
            ),
            (  # the errors of the first alternative too
                "spec.port",
                "FieldValueTypeInvalid",
                'Invalid value: "array": spec.port in body must be of type integer: "array"',
            ),
        ],
    ),
    ({"name": "ok", "when": "2024-01-02T03:04:05Z"}, []),
    (
        {"name": "ok", "when": "yesterday"},
        [
            (
                "spec.when",
                "FieldValueTypeInvalid",
                'Invalid value: "yesterday": spec.when in body must be of type date-time: "yesterday"',
            )
        ],
    ),
    ({"name": "ok", "ip": "10.0.0.1"}, []),
    (
        {"name": "ok", "ip": "10.0.0.256"},
        [
            (
                "spec.ip",
                "FieldValueTypeInvalid",
                'Invalid value: "10.0.0.256": spec.ip in body must be of type ipv4: "10.0.0.256"',
            )
        ],
    ),
    ({"name": "ok", "maybe": None}, []),
    (
        {"name": "ok", "tags": ["a", "b", "c"]},
        [("spec.tags", "FieldValueTooMany", "Too many: 3: must have at most 2 items")],
    ),
    (
        {"name": "ok", "tags": ["a", "a"]},
        [("spec.tags[1]", "FieldValueDuplicate", 'Duplicate value: "a"')],
    ),
    (
        {"name": "ok", "tags": [1]},
        [
            (
                "spec.tags[0]",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.tags[0] in body must be of type string: "integer"',
            )
        ],
    ),
    (
        {"name": "ok", "ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]},
        [("spec.ports[1]", "FieldValueDuplicate", 'Duplicate value: {"name":"a"}')],
    ),
    (
        {"name": "ok", "labels": {"a": 1}},
        [
            (
                "spec.labels.a",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.labels.a in body must be of type string: "integer"',
            )
        ],
    ),
    ({"name": "ok", "free": {"anything": [1, {"x": None}]}}, []),
    (
        {"name": "ok", "mode": 5},
        [
            (
                "spec.mode",
                "FieldValueTypeInvalid",
                'Invalid value: "integer": spec.mode in body must be of type string: "integer"',
            ),
            ("spec.mode", "FieldValueNotSupported", 'Unsupported value: 5: supported values: "A", "B"'),
        ],
    ),
    (  # a value that is no string is named by its Go format against the schema's format
        {"name": "ok", "when": 5},
        [
            (
                "spec.when",
                "FieldValueTypeInvalid",
                'Invalid value: "int64": spec.when in body must be of type date-time: "int64"',
            )
        ],
    ),
    (
        {"name": "ok", "i32": 2.5},
        [
            (
                "spec.i32",
                "FieldValueTypeInvalid",
                'Invalid value: "float64": spec.i32 in body must be of type int32: "float64"',
            ),
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": Checked value must be of type integer with format int32 in spec.i32',
            ),
        ],
    ),
    (
        {"name": "ok", "i32": 3000000000},
        [
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": Checked value must be of type integer with format int32 in spec.i32',
            )
        ],
    ),
    ({"name": "ok", "odd": 3}, []),
    (
        {"name": "ok", "odd": 4},
        [("<nil>", "FieldValueInvalid", 'Invalid value: "": "spec.odd" must not validate the schema (not)')],
    ),
    ({"name": "ok", "choice": "ax"}, []),
    (
        {"name": "ok", "choice": "ab"},
        [
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": "spec.choice" must validate one and only one schema (oneOf). '
                "Found 2 valid alternatives",
            )
        ],
    ),
    (
        {"name": "ok", "choice": "x"},
        [
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": "spec.choice" must validate one and only one schema (oneOf). '
                "Found none valid",
            ),
            (
                "spec.choice",
                "FieldValueInvalid",
                "Invalid value: \"x\": spec.choice in body should match '^a'",
            ),
        ],
    ),
    (
        {"name": "ok", "both": "abcd"},
        [
            ("spec.both", "FieldValueTooLong", "Too long: may not be more than 3 bytes"),
            (
                "<nil>",
                "FieldValueInvalid",
                'Invalid value: "": "spec.both" must validate all the schemas (allOf)',
            ),
        ],
    ),
]


@pytest.mark.parametrize(("spec", "expected"), VALIDATE_CASES)
def test_validate(spec: dict[str, Any], expected: list[tuple[str, str, str]]) -> None:
    assert _causes(spec) == expected


def test_null_of_a_field_that_is_not_nullable_is_invalid() -> None:
    """(Pruning drops it before validation: see ``test_null_is_dropped_through_the_api``.)"""
    assert _causes({"name": "ok", "flag": None}) == [
        (
            "spec.flag",
            "FieldValueTypeInvalid",
            'Invalid value: "null": spec.flag in body must be of type boolean: "null"',
        )
    ]


def test_required_top_level_fields() -> None:
    causes = schema.validate({"metadata": {}}, {"type": "object", "required": ["spec"], "properties": {}})
    assert [(c.field, c.message) for c in causes] == [("spec", "Required value")]


def test_prune_drops_unknown_fields_but_keeps_preserved_and_additional() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "n", "junk": 1, "labels": {"a": "b"}},
        "spec": {
            "name": "ok",
            "unknown": 1,
            "free": {"anything": {"deep": 1}},
            "labels": {"x": "y"},
            "ports": [{"name": "a", "extra": True}],
            "flag": None,
            "maybe": None,
        },
        "other": {},
    }
    pruning.prune(obj, SCHEMA)
    assert obj == {
        "apiVersion": "x/v1",
        "kind": "X",
        "metadata": {"name": "n", "labels": {"a": "b"}},
        "spec": {
            "name": "ok",
            "free": {"anything": {"deep": 1}},
            "labels": {"x": "y"},
            "ports": [{"name": "a"}],
            "maybe": None,
        },
    }


def test_defaults_apply_inside_present_objects_and_into_defaults() -> None:
    obj: dict[str, Any] = {"spec": {"name": "ok"}}
    pruning.apply_defaults(obj, SCHEMA)
    assert obj == {"spec": {"name": "ok", "mode": "A", "nested": {"inner": True}}}
    bare: dict[str, Any] = {}
    pruning.apply_defaults(bare, SCHEMA)
    assert bare == {}  # no spec, so nothing below it is defaulted
    explicit = {"spec": {"name": "ok", "mode": "B", "nested": {"inner": False}}}
    kept = copy.deepcopy(explicit)
    pruning.apply_defaults(kept, SCHEMA)
    assert kept == explicit


@pytest.mark.parametrize(
    ("fmt", "value", "ok"),
    [
        ("date-time", "2024-01-02T03:04:05.123+02:00", True),
        ("date-time", "2024-13-02T03:04:05Z", False),
        ("date", "2024-02-29", True),
        ("byte", "aGVsbG8=", True),
        ("byte", "not base64!", False),
        ("ipv6", "::1", True),
        ("cidr", "10.0.0.0/8", True),
        ("cidr", "10.0.0.0/33", False),
        ("uuid", "123e4567-e89b-12d3-a456-426614174000", True),
        ("hostname", "example.com", True),
        ("hostname", "-bad", False),
        ("int32", "anything", True),
    ],
)
def test_formats(fmt: str, value: str, ok: bool) -> None:
    assert formats.check_format(fmt, value) is ok


PROBES_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "schemaprobes.tests.example.com"},
    "spec": {
        "group": "tests.example.com",
        "names": {"plural": "schemaprobes", "singular": "schemaprobe", "kind": "SchemaProbe"},
        "scope": "Namespaced",
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": SCHEMA}}],
    },
}


@pytest.mark.parametrize(("spec", "expected"), VALIDATE_CASES)
async def test_validate_through_the_api(
    backend: backends.Backend, spec: dict[str, Any], expected: list[tuple[str, str, str]]
) -> None:
    """Each case a dry-run create (nothing stored: any namespace does); the real server's causes
    come in no fixed order."""
    await backend.apply_crd(PROBES_CRD)
    url = f"{backend.url}/apis/tests.example.com/v1/namespaces/default/schemaprobes?dryRun=All"
    body = {
        "apiVersion": "tests.example.com/v1",
        "kind": "SchemaProbe",
        "metadata": {"name": "n"},
        "spec": spec,
    }
    async with backend.http() as http, http.post(url, json=body) as resp:
        answer = await resp.json()
    if not expected:
        assert resp.status == 201, answer
        return
    assert resp.status == 422, answer
    causes = {(c["field"], c["reason"], c["message"]) for c in answer["details"]["causes"]}
    assert causes == set(expected)


async def test_null_is_dropped_through_the_api(backend: backends.Backend) -> None:
    """A null where the schema does not allow one is pruned before validation: not a 422."""
    await backend.apply_crd(PROBES_CRD)
    url = f"{backend.url}/apis/tests.example.com/v1/namespaces/default/schemaprobes?dryRun=All"
    spec = {"name": "ok", "flag": None, "maybe": None}
    body = {
        "apiVersion": "tests.example.com/v1",
        "kind": "SchemaProbe",
        "metadata": {"name": "n"},
        "spec": spec,
    }
    async with backend.http() as http, http.post(url, json=body) as resp:
        assert resp.status == 201
        assert (await resp.json())["spec"] == {
            "name": "ok",
            "maybe": None,
            "mode": "A",
            "nested": {"inner": True},
        }
