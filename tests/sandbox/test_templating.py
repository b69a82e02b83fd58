"""sandbox.templating reads templates as clusterctl does (SimpleProcessor on drone/envsubst).

The substitution rows come from drone/envsubst's own test cases for the forms clusterctl
templates use (defaults, nesting, escapes) and from clusterctl's variable listing and its
missing-variable check.
"""

from __future__ import annotations

import pytest

from sandbox import templating
from sandbox.templating import Variable

SUBSTITUTED = [
    pytest.param({}, "abcdEFGH28ij", "abcdEFGH28ij", id="text-only"),
    pytest.param({"var": "abc"}, "${var}", "abc", id="plain"),
    pytest.param({"var": "abc"}, "${var=xyz}", "abc", id="default-not-used"),
    pytest.param({}, "${var=xyz}", "xyz", id="default-used"),
    pytest.param({}, "${var:=xyz}", "xyz", id="colon-equals"),
    pytest.param({}, "${var:-xyz}", "xyz", id="colon-dash"),
    pytest.param({"var": ""}, "${var:=xyz}", "xyz", id="empty-value-takes-the-default"),
    pytest.param({"var": ""}, "${var=xyz}", "xyz", id="equals-alike-for-empty"),
    pytest.param({"var": ""}, "a${var}b", "ab", id="given-empty"),
    pytest.param({"d": "foo"}, "something ${var=${d}}", "something foo", id="nested-default"),
    pytest.param({"d": "foo1"}, "foo: ${var=prefix${d}-suffix}", "foo: prefixfoo1-suffix", id="nested-mixed"),
    pytest.param({}, "x: ${var:=${unset}}", "x: ", id="nested-unset-is-empty"),
    pytest.param({"v": "abc"}, "$${v}", "${v}", id="escaped"),
    pytest.param(
        {"var01": "abcdEFGH28ij"},
        "some text ${var01}$${var$${var01}$var01${var01}",
        "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
        id="escapes-and-bare-dollar",
    ),
    pytest.param({"d": "foo"}, "something $${var=${d}}", "something ${var=foo}", id="escaped-with-nested"),
    pytest.param({}, "price: 5$", "price: 5$", id="lone-dollar"),
    pytest.param({}, "$$$", "$$", id="three-dollars"),
    pytest.param({}, "a\\\\b \\/c \\d", "a\\b /c \\d", id="backslash-escapes"),
    pytest.param({"VAR": "x"}, "${ VAR } ${ VAR} ${VAR }", "x x x", id="legacy-blanks"),
    pytest.param({"A-b": "dash"}, "${A-b}", "dash", id="dash-is-part-of-the-name"),
    pytest.param({"N": "3"}, "replicas: ${N:=2}\nn: ${N}", "replicas: 3\nn: 3", id="twice"),
]


@pytest.mark.parametrize(("values", "text", "expected"), SUBSTITUTED)
def test_substitute(values: dict[str, str], text: str, expected: str) -> None:
    assert templating.substitute(text, values) == expected


LISTED = [
    pytest.param("", [], id="none"),
    pytest.param("${B} ${A}", [Variable("A", True), Variable("B", True)], id="sorted-required"),
    pytest.param("${A:=1} ${A}", [Variable("A", False, "1")], id="first-occurrence-describes"),
    pytest.param("${A} ${A:=1}", [Variable("A", True)], id="first-occurrence-required"),
    pytest.param("${A:=x${B}y}", [Variable("A", False, "x${B}y")], id="nested-not-listed"),
    pytest.param("${A:=}", [Variable("A", False)], id="empty-default-listed-optional"),
    pytest.param("$${A} $A", [], id="escaped-and-bare-are-not-variables"),
]


@pytest.mark.parametrize(("text", "expected"), LISTED)
def test_variables(text: str, expected: list[Variable]) -> None:
    assert templating.variables(text) == expected


MISSING = [
    pytest.param("${A} ${B:=b} ${C}", {}, ["A", "C"], id="required-without-value"),
    pytest.param("${A} ${A:=x}", {}, ["A"], id="first-occurrence-decides"),
    pytest.param("${A:=}", {}, ["A"], id="empty-default-is-no-default"),
    pytest.param("${Z} ${Y}", {"Y": ""}, ["Z"], id="given-empty-is-given"),
]


@pytest.mark.parametrize(("text", "values", "missing"), MISSING)
def test_missing_variables_are_named(text: str, values: dict[str, str], missing: list[str]) -> None:
    with pytest.raises(templating.MissingVariables) as info:
        templating.substitute(text, values)
    assert info.value.names == missing
    assert f"value for variables [{', '.join(missing)}] is not set" in str(info.value)


REFUSED = [
    pytest.param("a: ${#VAR}", "unsupported or bad substitution at line 1: '${#VAR}'", id="length"),
    pytest.param("a\nb: ${V:1}", "unsupported substitution at line 2: '${V:1}'", id="substring"),
    pytest.param("${V/a/b}", "unsupported substitution", id="replace"),
    pytest.param("${V^^}", "unsupported substitution", id="upper"),
    pytest.param("x: ${V", "(no closing brace) at line 1", id="unterminated"),
    pytest.param("x: ${V:=abc", "(no closing brace) at line 1", id="unterminated-default"),
    pytest.param("${}", "unsupported or bad substitution", id="empty"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_what_we_do_not_read_is_refused_naming_where(text: str, message: str) -> None:
    with pytest.raises(templating.TemplateError) as info:
        templating.substitute(text, {"V": "x", "VAR": "x"})
    assert message in str(info.value)
