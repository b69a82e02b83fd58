"""common.templating: clusterctl's variables listed and substituted, by tables."""

from __future__ import annotations

import pytest

from common import templating
from common.templating import Variable

LISTED = [
    ("required", "a: ${A}", [Variable("A", None)]),
    ("legacy spaces", "a: ${ A }", [Variable("A", None)]),
    ("default :=", "image: ${IMG:=kamaji-broker:0.1.0}", [Variable("IMG", "kamaji-broker:0.1.0")]),
    ("empty default", "--namespace=${NS:=}", [Variable("NS", "")]),
    ("default :-", "${A:-x}", [Variable("A", "x")]),
    ("default = (unset only)", "${A=x}", [Variable("A", "x", when_empty=False)]),
    ("default - (unset only)", "${A-x}", [Variable("A", "x", when_empty=False)]),
    ("first occurrence decides", "${B} ${A:=1} ${B:=2} ${A}", [Variable("A", "1"), Variable("B", None)]),
    ("nested default, not listed", "${T:=${NS}}", [Variable("T", "${NS}")]),
    ("nested default among text", "${T:=a-${NS}-b}", [Variable("T", "a-${NS}-b")]),
    ("escaped dollar", "cost: $$5 and $${NOT}", []),
    ("lone dollar", "a: $ b: $1 c: $(cmd)", []),
    ("none", "kind: Namespace", []),
]


@pytest.mark.parametrize(("text", "expected"), [r[1:] for r in LISTED], ids=[r[0] for r in LISTED])
def test_variables(text: str, expected: list[Variable]) -> None:
    assert templating.variables(text) == expected


SUBSTITUTED = [
    ("value", "a: ${A}", {"A": "1"}, "a: 1"),
    ("legacy spaces", "a: ${ A }", {"A": "1"}, "a: 1"),
    ("default when unset", "${A:=d}", {}, "d"),
    ("default when empty", "${A:=d}", {"A": ""}, "d"),
    ("value over default", "${A:=d}", {"A": "v"}, "v"),
    ("empty kept with =", "[${A=d}]", {"A": ""}, "[]"),
    ("default with = when unset", "${A=d}", {}, "d"),
    ("empty default", "--namespace=${NS:=}", {}, "--namespace="),
    ("default with colons", "${IMG:=ghcr.io/x/y:v1}", {}, "ghcr.io/x/y:v1"),
    ("escaped dollar", "$${A} $$", {"A": "1"}, "${A} $"),
    ("lone dollar", "$1 $ $(x)", {}, "$1 $ $(x)"),
    ("several", "${A}-${B:=b}-${A}", {"A": "a"}, "a-b-a"),
    ("nested default", "${T:=${NS}}", {"NS": "team-a"}, "team-a"),
    ("nested default unused", "${T:=${NS}}", {"T": "t"}, "t"),
    ("nested default without value: empty, as clusterctl", "[${T:=${NS}}]", {}, "[]"),
    ("nested default with text", "${T:=a-${NS:=x}-b}", {}, "a-x-b"),
    ("value with dollar left alone", "${A}", {"A": "$B"}, "$B"),
]


@pytest.mark.parametrize(
    ("text", "values", "expected"), [r[1:] for r in SUBSTITUTED], ids=[r[0] for r in SUBSTITUTED]
)
def test_substitute(text: str, values: dict[str, str], expected: str) -> None:
    assert templating.substitute(text, values) == expected


def test_every_missing_variable_is_named() -> None:
    with pytest.raises(templating.MissingVariables, match=r"value for variables \[A, C\] is not set") as e:
        templating.substitute("${C} ${B:=x} ${A} ${C}", {})
    assert e.value.names == ["A", "C"]


@pytest.mark.parametrize("text", ["$A", "x: $NAME", "${A/b/c}", "${#A}", "${A", "${}", "${A:=${B}"])
def test_expressions_envsubst_would_read_are_refused(text: str) -> None:
    with pytest.raises(templating.TemplateError, match="unsupported expression"):
        templating.variables(text)
    with pytest.raises(templating.TemplateError, match="unsupported expression"):
        templating.substitute(text, {"A": "1", "NAME": "n"})
