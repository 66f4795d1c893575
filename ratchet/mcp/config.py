"""Which MCP servers a worker can reach (`McpServer`), and what a profile takes from them (`McpToolset`).

Servers are the worker's deployment: a file named by RATCHET_MCP_SERVERS (JSON, or TOML by its
`.toml` suffix), or `RatchetOptions.mcp` in code.

    {"servers": {
        "tracker": {"command": "python", "args": ["-m", "tracker_mcp"], "env": {"TRACKER_TOKEN": "${TRACKER_TOKEN}"}},
        "docs":    {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
    }}

`${NAME}` in an env or header value is the worker's environment variable NAME, read when the server
is started or connected: such variables are secrets (ratchet/ops/secrets.py keeps them from the
programs the agent runs and redacts their values everywhere), and the file holds only their names.

A profile names the servers it uses (`AgentProfile.mcp`), which of their tools the model gets, and
decisions the server's annotations cannot make: effect classes, idempotency, compensating tools.
Only pydantic, the standard library and ratchet.contracts are imported here.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from ratchet.contracts import Strict, problems
from ratchet.contracts.mcp import SERVER_NAME, Compensation, McpToolset  # noqa: F401  (what a profile takes)

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""What a model provider accepts as a function name."""
KEY_META = "ratchet/idempotency-key"
"""The `_meta` entry of every `tools/call` request that carries the call's idempotency key (the
ledger's key, stable across retries and workers): a server that honours it can deduplicate."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class McpConfigError(ValueError):
    """A server configuration that cannot work; the message names the server (and the file)."""


class McpServer(Strict):
    """One MCP server: a program this worker starts (`command`, spoken to over stdio) or an endpoint
    it connects to (`url`, streamable HTTP)."""

    name: str = Field(pattern=SERVER_NAME)
    command: str | None = None
    """Program to start (stdio transport); one per worker, started at its first call."""
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """The program's environment beside a minimal one (HOME, PATH, ...); `${NAME}` reads the worker's NAME."""
    cwd: str | None = None
    url: str | None = None
    """Streamable HTTP endpoint (http:// or https://)."""
    headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers of every request; `${NAME}` reads the worker's NAME (e.g. `Bearer ${DOCS_TOKEN}`)."""
    timeout_s: float = Field(60.0, gt=0, le=3600)
    """Start-to-close timeout of each call (its activity); a call without an answer by 90% of it
    counts as interrupted and the connection is restarted."""
    max_attempts: int = Field(5, ge=1)
    """Attempts of each call (activity retries, 0.5 s backoff doubling)."""
    max_concurrent: int = Field(8, ge=1)
    """Calls in flight to this server from one worker; more wait their turn."""
    startup_timeout_s: float = Field(20.0, gt=0)
    """How long starting or connecting (and the MCP handshake) may take."""
    local: bool = False
    """The server is on this host and fast: its read-only tools may run as local activities (no
    server round trip; ratchet.core.tools.runs_locally decides the rest)."""
    max_message_bytes: int = Field(64 * 1024 * 1024, ge=1024)
    """Largest message a stdio server may send; a larger one resets the connection."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either `command` (a stdio server) or `url` (streamable HTTP), not both or neither")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"url must start with http:// or https://, not {self.url[:40]!r}")
        if self.url is None and self.headers:
            raise ValueError("headers are for `url` servers; a stdio server gets `env`")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    @property
    def activity_type(self) -> str:
        return f"mcp.{self.name}"

    def secret_variables(self) -> list[str]:
        """The worker variables this server's env and headers name (`${NAME}`)."""
        values = [*self.env.values(), *self.headers.values()]
        return sorted({name for value in values for name in _VARIABLE.findall(value)})

    def resolved_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {key: self._resolve(value, environ, f"env {key}") for key, value in self.env.items()}

    def resolved_headers(self, environ: Mapping[str, str]) -> dict[str, str]:
        return {key: self._resolve(value, environ, f"header {key}") for key, value in self.headers.items()}

    def _resolve(self, value: str, environ: Mapping[str, str], where: str) -> str:
        def variable(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in environ:
                raise McpConfigError(
                    f"MCP server {self.name!r}: {where} names ${{{name}}}, which this worker's environment lacks"
                )
            return environ[name]

        return _VARIABLE.sub(variable, value)


def public_name(server: str, tool: str) -> str:
    """The name the model sees for `tool` of `server`: `<server>__<tool>` when that is a valid
    function name (`^[A-Za-z0-9_-]{1,64}$`), else its valid characters cut to fit plus a hash of
    the pair, so the mapping is a pure function of the pair (the plan records it all the same)."""
    name = f"{server}__{tool}"
    if TOOL_NAME.match(name):
        return name
    digest = hashlib.sha256(f"{server}\x00{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{re.sub(r'[^A-Za-z0-9_-]', '_', name)[:53]}_{digest}"


def load_servers(path: Path) -> list[McpServer]:
    """The servers of a RATCHET_MCP_SERVERS file: `{"servers": {NAME: {...}}}` (JSON, or TOML
    `[servers.NAME]` tables). Raises McpConfigError naming the file and the server."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise McpConfigError(f"RATCHET_MCP_SERVERS: cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(text) if str(path).endswith(".toml") else json.loads(text)
    except ValueError as exc:
        raise McpConfigError(
            f"RATCHET_MCP_SERVERS: {path} is not valid {'TOML' if str(path).endswith('.toml') else 'JSON'}: {exc}"
        ) from None
    servers = data.get("servers") if isinstance(data, dict) else None
    if not isinstance(servers, dict) or set(data) != {"servers"}:
        raise McpConfigError(
            f'RATCHET_MCP_SERVERS: {path} must hold one `servers` table: {{"servers": {{NAME: {{...}}}}}}'
        )
    found = []
    for name, fields in servers.items():
        if not isinstance(fields, dict):
            raise McpConfigError(f"RATCHET_MCP_SERVERS: {path}: server {name!r} must be a table of settings")
        try:
            found.append(McpServer.model_validate({**fields, "name": name}))
        except ValidationError as exc:
            raise McpConfigError(f"RATCHET_MCP_SERVERS: {path}: server {name!r}: {_first_problem(exc)}") from None
    return found


def _first_problem(exc: ValidationError) -> str:
    [first] = problems(exc, whole="", limit=1)
    where, _, message = first.partition(": ")
    message = message.removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
