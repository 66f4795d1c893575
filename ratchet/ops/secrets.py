"""The worker's secrets: which variables hold them, and the values to keep out of everything it writes.

One table drives both uses. Programs the agent runs start without any of these variables
(`child_environment`), and every value they hold is redacted, in the forms `ratchet/ops/redaction.py`
matches, from activity results and failures (hence history and the model's input), the ledger, the
tool outputs kept as artifacts, and the worker's logs.

A variable's whole value is the secret unless the table says how to find the secret in it: only the
password of a ledger URL, the header values of OPENAI_CUSTOM_HEADERS and ANTHROPIC_CUSTOM_HEADERS,
the contents of the TLS key file a TEMPORAL_TLS_*_KEY_PATH names. Operators name more in
RATCHET_SECRET_VARIABLES=NAME1,NAME2 (in the worker's environment, beside the variables it names; a
RATCHET_ENV_FILE is not read for it). The MCP servers' configuration names more: every `${NAME}` in
a server's env or headers (ratchet/mcp/config.py).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pydantic import AliasChoices, SecretStr

from ratchet.ops.settings import Settings, SettingsError

MIN_SECRET_CHARS = 8
"""Shorter values are not redacted: replacing them would mangle ordinary text."""
OPERATOR_VARIABLES = "RATCHET_SECRET_VARIABLES"
"""Comma-separated names of more variables whose values are secrets (a deployment's own tokens)."""

Secret = str | bytes
"""A secret value; bytes when it is not text (a decoded key)."""


def _whole(name: str, value: str) -> list[Secret]:
    return [value]


def _nothing(name: str, value: str) -> list[Secret]:
    return []


def _header_values(name: str, value: str) -> list[Secret]:
    """*_CUSTOM_HEADERS: `Name: value` lines (ratchet/models/settings.py)."""
    return [line.partition(":")[2].strip() for line in value.split("\n") if ":" in line]


_PASSWORD_PARAMETER = re.compile(r"(?:^|[?&\s])(?:ssl)?password\s*=\s*('(?:[^'\\]|\\.)*'|[^&#\s]*)", re.IGNORECASE)


def _url_password(name: str, value: str) -> list[Secret]:
    """A database URL's password: of its user info, or a `password=` / `sslpassword=` parameter (in
    the query, or in a libpq `key=value` string); as written and percent-decoded."""
    try:
        found = [urlsplit(value).password or ""]
    except ValueError:
        found = []
    found += [p.strip("'") for p in _PASSWORD_PARAMETER.findall(value)]
    return [*(p for p in found if p), *(unquote(p) for p in found if p)]


def _codec_keys(name: str, value: str) -> list[Secret]:
    """ID:BASE64KEY[,...]: the whole spec, each key as written and each key's bytes."""
    keys = [entry.partition(":")[2].strip() for entry in value.split(",")]
    return [value, *keys, *(_b64_bytes(k) for k in keys)]


def _temporal_tls(name: str, value: str) -> list[Secret]:
    """A client key, inline (`*_KEY_DATA`) or in the file a `*_KEY_PATH` names; certificates and the
    other TLS variables are not secret."""
    if name.endswith("_KEY_DATA"):
        return key_material(value.encode())
    if name.endswith("_KEY_PATH"):
        try:
            return key_material(Path(value).read_bytes())
        except OSError:
            return []  # the connection reports the unreadable file
    return []


SECRET_VARIABLES: dict[str, Callable[[str, str], list[Secret]]] = {
    # the openai client, its Azure and Bedrock variants (the variables openai reads)
    "OPENAI_API_KEY": _whole,
    "OPENAI_ADMIN_KEY": _whole,
    "OPENAI_WEBHOOK_SECRET": _whole,
    "OPENAI_CUSTOM_HEADERS": _header_values,
    "AZURE_OPENAI_API_KEY": _whole,
    "AZURE_OPENAI_AD_TOKEN": _whole,
    "AWS_BEARER_TOKEN_BEDROCK": _whole,
    # the anthropic client (the variables the anthropic provider reads)
    "ANTHROPIC_API_KEY": _whole,
    "ANTHROPIC_AUTH_TOKEN": _whole,
    "ANTHROPIC_CUSTOM_HEADERS": _header_values,
    # Temporal (the config file holds keys: read through the connection, `secret_values`)
    "TEMPORAL_API_KEY": _whole,
    "TEMPORAL_CONFIG_FILE": _nothing,
    # Ratchet's stores and payload encryption
    "RATCHET_CODEC_KEYS": _codec_keys,
    "RATCHET_CODEC_TOKEN": _whole,
    "RATCHET_LEDGER_URL": _url_password,
    "RATCHET_TRACKER_URL": _url_password,  # the example tracker's database (activities/tracker_tools.py)
    "AWS_SECRET_ACCESS_KEY": _whole,
    "AWS_SESSION_TOKEN": _whole,
}
"""Variable -> the secrets in its value. Every one is also kept from programs the agent runs."""

SECRET_PREFIXES: dict[str, Callable[[str, str], list[Secret]]] = {
    "TEMPORAL_TLS_": _temporal_tls,
    "TEMPORAL_GRPC_META_": _whole,  # gRPC headers: an authorization header
}
"""Variables by prefix, as SECRET_VARIABLES."""


_CONFIGURED: set[str] = set()
"""Variables that configuration names as holding secrets: the `${NAME}` in an MCP server's env or
headers (ratchet/mcp/config.py). Treated as RATCHET_SECRET_VARIABLES' names are."""


def name_secret_variables(names: Iterable[str]) -> None:
    """Add variables named by configuration (an MCP server's `${NAME}`) to the secret list."""
    _CONFIGURED.update(names)


def operator_variables(environ: Mapping[str, str]) -> list[str]:
    named = [name.strip() for name in environ.get(OPERATOR_VARIABLES, "").split(",") if name.strip()]
    return named + sorted(_CONFIGURED - set(named))


def is_secret_variable(name: str, operator_named: list[str]) -> bool:
    """Kept from programs the agent runs (RATCHET_SECRET_VARIABLES too: it says where secrets are)."""
    return (
        name in SECRET_VARIABLES
        or name.startswith(tuple(SECRET_PREFIXES))
        or name in operator_named
        or name == OPERATOR_VARIABLES
    )


def secrets_in(name: str, value: str, operator_named: list[str]) -> list[Secret]:
    """The secrets variable `name` holds (none when it is not secret-bearing)."""
    if name in SECRET_VARIABLES:
        return SECRET_VARIABLES[name](name, value)
    for prefix, extract in SECRET_PREFIXES.items():
        if name.startswith(prefix):
            return extract(name, value)
    return [value] if name in operator_named else []


def child_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's environment minus every secret-bearing variable: a program the model runs
    (`env`, `printenv`) must not read the model keys, the Temporal key or its TLS and config files,
    the codec keys, the ledger's database password, the object store's keys or the operator's own."""
    environ = os.environ if environ is None else environ
    named = operator_variables(environ)
    return {name: value for name, value in environ.items() if not is_secret_variable(name, named)}


def secret_values(
    settings: Settings, environ: Mapping[str, str] | None = None, more: Iterable[Secret] = ()
) -> list[Secret]:
    """Every secret this worker holds, longest first: from its environment and its RATCHET_ENV_FILE
    by the table above (the model providers read theirs from both), from the settings given in code
    by the same table, from Temporal's connection (an API key, gRPC headers or a client key in the
    Temporal config file), and `more` (the model providers' own settings: `ProviderRegistry.secrets`)."""
    environ = os.environ if environ is None else environ
    _name_mcp_variables(settings)
    named = operator_variables(environ)
    found: list[Secret] = list(more)
    for name, value in [*environ.items(), *_env_file_variables(settings), *_settings_variables(settings)]:
        found += secrets_in(name, value, named)
    found += _connection_secrets(settings)
    return sorted({v for v in found if v and len(v) >= MIN_SECRET_CHARS}, key=len, reverse=True)


def _name_mcp_variables(settings: Settings) -> None:
    """The variables RATCHET_MCP_SERVERS' servers name, so the log redactor (built before the worker
    reads the file for its servers) knows them too. A file that cannot be read is reported there."""
    if settings.mcp_servers is None:
        return
    from ratchet.mcp.config import McpConfigError, load_servers  # pydantic and stdlib only

    try:
        name_secret_variables(v for server in load_servers(settings.mcp_servers) for v in server.secret_variables())
    except McpConfigError:
        pass


def key_material(data: bytes) -> list[Secret]:
    """A private key's secrets: a PEM block's base64 body (as one line: each line of the file is a
    substring of it) and the DER bytes it encodes; anything else as it is."""
    text = data.decode("ascii", errors="ignore")
    if "-----BEGIN" not in text:
        return [text if text.isprintable() else data]
    body = "".join(
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.startswith("-----") and ":" not in line  # headers, Proc-Type: ...
    )
    der = _b64_bytes(body)
    return [body] + ([der] if der else [])


def _env_file_variables(settings: Settings) -> list[tuple[str, str]]:
    """(variable, value) of the settings' env file (RATCHET_ENV_FILE), which providers read too."""
    env_file = settings.model_config.get("env_file")
    if not isinstance(env_file, (str, Path)):
        return []
    from dotenv import dotenv_values  # pydantic-settings' own reader of env files

    return [(name, value) for name, value in dotenv_values(env_file).items() if value]


def _settings_variables(settings: Settings) -> list[tuple[str, str]]:
    """(variable, value) of each setting whose variable is secret-bearing."""
    pairs = []
    for field_name, info in Settings.model_fields.items():
        alias = info.validation_alias
        value = getattr(settings, field_name)
        if not isinstance(alias, AliasChoices) or value is None:
            continue
        variable = str(alias.choices[0])
        if is_secret_variable(variable, []):
            pairs.append((variable, value.get_secret_value() if isinstance(value, SecretStr) else str(value)))
    return pairs


def _connection_secrets(settings: Settings) -> list[Secret]:
    try:
        connection = settings.temporal_connection()
    except SettingsError:
        return []  # the worker reports it when it connects
    found: list[Secret] = list(connection.rpc_metadata.values())
    if connection.api_key is not None:
        found.append(connection.api_key.get_secret_value())
    key = getattr(connection.tls, "client_private_key", None)
    if isinstance(key, bytes):
        found += key_material(key)
    return found


def _b64_bytes(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""
