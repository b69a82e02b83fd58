"""String formats and patterns as the apiextensions-apiserver checks them (for ``schema``).

Owns ``format`` checks (the cheap ones: date-time, date, byte, ipv4/ipv6, cidr, uuid,
hostname; unknown formats pass) and how a schema ``pattern`` is compiled so that Python's
``re`` reads it as RE2 and ECMA-262 do. Pure.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from datetime import datetime
from functools import lru_cache


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> re.Pattern[str]:
    # ECMA-262 and Go RE2 agree with Python's re for the patterns CRDs use in practice, but for
    # '$': the end of the text there, while Python's also matches before a final newline (the
    # API server refuses "site-a\n" for ^[a-z-]+$; Python's re would accept it).
    return re.compile(end_of_text(pattern))


def end_of_text(pattern: str) -> str:
    """``pattern`` with each unescaped ``$`` outside a character class read as RE2 reads it:
    the end of the text (Python's ``\\Z``)."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        out.append(r"\Z" if c == "$" and not in_class else c)
        i += 1
    return "".join(out)


_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*$"
)


def check_format(fmt: str, value: str) -> bool:
    """The cheap string formats; unknown formats (int32, int64, password, ...) always pass."""
    try:
        if fmt == "date-time":
            return bool(_DATE_TIME.fullmatch(value)) and bool(datetime.fromisoformat(value.replace("z", "Z")))
        if fmt == "date":
            return bool(datetime.strptime(value, "%Y-%m-%d"))
        if fmt == "byte":
            base64.b64decode(value, validate=True)
            return True
        if fmt == "ipv4":
            return isinstance(ipaddress.ip_address(value), ipaddress.IPv4Address)
        if fmt == "ipv6":
            return isinstance(ipaddress.ip_address(value), ipaddress.IPv6Address)
        if fmt == "cidr":
            ipaddress.ip_network(value, strict=False)
            return True
        if fmt == "uuid":
            return bool(_UUID.fullmatch(value))
        if fmt == "hostname":
            return bool(_HOSTNAME.fullmatch(value))
    except (ValueError, binascii.Error):
        return False
    return True
