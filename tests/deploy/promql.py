"""The metric names a PromQL expression reads, by a small PromQL-aware tokenizer; and the names a
registry exposes on /metrics.

``metric_names`` walks the expression once, token by token: string literals, label matchers
(``{...}``, but ``__name__="x"`` names a metric), ranges and subqueries (``[5m:1m]``), label
lists after by/without/on/ignoring/group_left/group_right, numbers and durations, Grafana's
variables (``$site``, ``${site}``, ``[[site]]``, ``$__rate_interval``) and the keywords are skipped;
an identifier followed by ``(`` (or by ``by``/``without``) is a function or an aggregation;
any other identifier is a metric name. Grafana's ``label_values([metric,] label)`` (a variable's
query) reads its metric.

``exposed_names`` is what Prometheus scrapes from a prometheus_client registry: a counter as
``<name>_total`` (and ``_created``), a histogram as ``_bucket``/``_sum``/``_count``, a gauge as
itself; never a histogram's or a counter's bare name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
     "and", "or", "unless", "atan2", "inf", "nan"}
)  # fmt: skip
"""Words that are never metric names (PromQL keywords and operators; compared lower-case)."""
LABEL_LISTS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
"""Keywords whose parenthesised list names labels, not metrics."""

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`)
  | (?P<grafana>\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\])
  | (?P<matchers>\{(?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`[^`]*`|[^}"'`])*\})
  | (?P<range>\[[^\]]*\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d[\w.]*(?:[eE][+-]?\d+)?)|\.\d+)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_NAME_MATCHER = re.compile(r"""__name__\s*=\s*(["'`])([a-zA-Z_:][a-zA-Z0-9_:]*)\1""")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?P<args>.*)\)\s*$", re.DOTALL)


def _tokens(expr: str) -> Iterator[tuple[str, str]]:
    for m in _TOKEN.finditer(expr):
        if m.lastgroup != "space":
            yield m.lastgroup or "other", m.group()


def metric_names(expr: str) -> set[str]:
    """Every metric name ``expr`` reads (PromQL, or a Grafana ``label_values`` query)."""
    grafana = _LABEL_VALUES.match(expr)
    if grafana is not None:
        args = grafana.group("args")
        # label_values(label) reads no metric; label_values(selector, label) reads the selector's.
        return metric_names(args.rsplit(",", 1)[0]) if "," in args else set()
    tokens = list(_tokens(expr))
    names: set[str] = set()
    skip_list = False
    for i, (kind, text) in enumerate(tokens):
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if skip_list:
            skip_list = text != ")"
            continue
        if kind == "matchers":
            names.update(m.group(2) for m in _NAME_MATCHER.finditer(text))
        elif kind == "ident":
            word = text.lower()
            if word in LABEL_LISTS and following == "(":
                skip_list = True  # the "(" comes next; the list ends at its ")"
            elif word not in KEYWORDS and following != "(" and following.lower() not in ("by", "without"):
                names.add(text)  # not a function, nor an aggregation: sum by (le) (...)
    return names


def unknown_names(expr: str, exported: set[str]) -> set[str]:
    """The names ``expr`` reads that nothing exports: empty when the expression can work."""
    return metric_names(expr) - exported


def exposed_names(registry: CollectorRegistry) -> set[str]:
    """The sample names a scrape of ``registry`` can return, whether or not a sample exists yet
    (a labelled family has none until its first ``labels()``)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gauge": ("",),
        "info": ("_info",),
    }
    names = {f.name + s for f in registry.collect() for s in suffixes.get(f.type, ("",))}
    # What the exposition actually carries now must be among them (guards the table above).
    scraped = {
        s.name
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for s in family.samples
    }
    assert scraped <= names, scraped - names
    return names
