"""Durations as operators write them (``90s``, ``5m``, ``1h30m``, ``250ms``, or plain seconds).

Pure. Used by the settings of hub and agent; the parse error names what was wrong.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")


def parse(value: str | float | int) -> float:
    """Seconds in ``value``; ValueError with the accepted forms for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        try:
            seconds = float(text)
        except ValueError:
            parts = _PART.findall(text)
            if not parts or "".join(n + u for n, u in parts) != text:
                raise ValueError(
                    f"invalid duration {value!r}: use a number of seconds or units like 90s, 5m, 1h30m, 250ms"
                ) from None
            seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    if seconds < 0:
        raise ValueError(f"invalid duration {value!r}: must not be negative")
    return seconds


Duration = Annotated[float, BeforeValidator(parse)]
"""A pydantic field type: seconds, from a number or a duration string."""
