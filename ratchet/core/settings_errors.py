"""What settings and the stores share, beneath both: the error a bad setting raises, and a store
URL shown without its password (`ratchet config`, logs, error messages)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit


class SettingsError(Exception):
    """Settings that cannot work; the message names the setting."""


_PASSWORD_PARAMETER = re.compile(r"((?:^|[?&\s])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&#\s]*)", re.IGNORECASE)


def mask_url(url: str) -> str:
    """`url` for display: the password of its user info, and a `password=` / `sslpassword=` query
    parameter (libpq reads both; also in a `key=value` connection string), replaced by `****`. A
    password with an unescaped `@`, `/`, `?` or `#` is masked too: when the URL cannot be split
    cleanly, everything from the first `:` after the user up to the last `@` is masked (too much
    rather than a secret)."""
    url = _PASSWORD_PARAMETER.sub(r"\1****", url)
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        parts, password = None, None
    if parts is not None and password is not None and "@" not in parts.path + parts.query + parts.fragment:
        userinfo = parts.netloc.rpartition("@")[0]
        return url.replace(f"://{userinfo}@", f"://{userinfo.partition(':')[0]}:****@", 1)
    userinfo, _, after = rest.rpartition("@")
    user = userinfo.partition(":")[0]
    if ":" not in userinfo or any(c in user for c in "/?#"):  # no user info: an `@` further on
        return url
    return f"{scheme}://{user}:****@{after}"
