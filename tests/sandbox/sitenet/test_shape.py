"""A link's shape: checked field by field, written as linkshaper reads it, its answers read back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sandbox.sitenet import shape
from sandbox.sitenet.shape import Counts, LinkError, Shape


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"delay": -0.1}, "delay must be between 0 and 60 s"),
        ({"delay": 61}, "delay must be between 0 and 60 s"),
        ({"delay": float("nan")}, "delay must be a finite number"),
        ({"delay": 0.1, "jitter": 0.2}, "jitter must be between 0 and the delay (0.1 s)"),
        ({"jitter": -1}, "jitter must be between 0 and the delay"),
        ({"loss": 1.5}, "loss must be between 0 and 1"),
        ({"loss": float("inf")}, "loss must be a finite number"),
    ],
)
def test_a_shape_out_of_range_names_its_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValueError, match="link shape: " + field.replace("(", r"\(").replace(")", r"\)")):
        Shape(**kwargs)


@pytest.mark.parametrize(
    ("out", "into", "line"),
    [
        (None, None, {}),
        (shape.CLEAR, None, {"out": {"delay_ms": 0.0, "jitter_ms": 0.0, "loss": 0.0, "down": False}}),
        (None, shape.DOWN, {"in": {"delay_ms": 0.0, "jitter_ms": 0.0, "loss": 0.0, "down": True}}),
        (
            Shape(delay=0.1, jitter=0.01, loss=0.05),
            Shape(delay=0.0005),
            {
                "out": {"delay_ms": 100.0, "jitter_ms": 10.0, "loss": 0.05, "down": False},
                "in": {"delay_ms": 0.5, "jitter_ms": 0.0, "loss": 0.0, "down": False},
            },
        ),
    ],
)
def test_a_request_is_one_json_line_of_the_directions_given(
    out: Shape | None, into: Shape | None, line: dict[str, object]
) -> None:
    written = shape.request(out=out, into=into)
    assert written.endswith(b"\n") and written.count(b"\n") == 1
    assert json.loads(written) == line


def test_an_answer_gives_both_directions_counts() -> None:
    line = b'{"ok":true,"out":{"passed":12,"dropped":1},"in":{"passed":9,"dropped":0}}\n'
    assert shape.answer(line) == (Counts(passed=12, dropped=1), Counts(passed=9, dropped=0))


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'{"ok":false,"error":"out: loss must be between 0 and 1, got 2"}', "refused the change: out: loss"),
        (b'{"ok":false}', "refused the change: no reason given"),
        (b"linkshaper: queue 1: operation not permitted", "not its answer"),
        (b"[1, 2]", "not its answer"),
        (b'{"ok":true,"out":{"passed":1,"dropped":0}}', "not its answer"),
        (b'{"ok":true,"out":{"passed":"1","dropped":0},"in":{"passed":0,"dropped":0}}', "not its answer"),
        (b'{"ok":true,"out":[],"in":{"passed":0,"dropped":0}}', "not its answer"),
    ],
)
def test_a_refusal_or_a_stranger_line_is_a_link_error(line: bytes, said: str) -> None:
    with pytest.raises(LinkError, match=said):
        shape.answer(line)
