"""A real OpenID provider for tests: npm's `oidc-provider` under node (no root, no Docker),
installed once into ~/.cache/ratchet/oidc-provider-VERSION (RATCHET_OIDC_PROVIDER_DIR); tests that
need it skip when neither it nor npm is there. tests/oidc_provider.js configures it: the clients
and accounts given here, PKCE required, its development login page (any name, any password, then
a consent page), the account's `groups` in the ID token. Ready in about half a second.

`sign_in` walks the provider's pages with plain HTTP as a browser would (a cookie jar, its forms)
and stops at the redirect back to the console."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import httpx2 as httpx
import pytest

from devtools.devserver import free_port

VERSION = "9.13.3"
SCRIPT = Path(__file__).with_name("oidc_provider.js")


def provider_module() -> Path:
    """oidc-provider's entry module, installed from npm into the cache directory first if absent."""
    root = Path(
        os.environ.get("RATCHET_OIDC_PROVIDER_DIR") or Path.home() / ".cache" / "ratchet" / f"oidc-provider-{VERSION}"
    )
    module = root / "node_modules" / "oidc-provider" / "lib" / "index.js"
    if module.exists():
        return module
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("oidc-provider is not installed and there is no npm to install it (Node.js 20.19 or later)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:  # pytest-xdist's workers install it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not module.exists():
            done = subprocess.run(
                [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", f"oidc-provider@{VERSION}"],
                capture_output=True,
                text=True,
                timeout=600,
            )
            if done.returncode != 0 or not module.exists():
                raise RuntimeError(f"npm install oidc-provider failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return module


@dataclass
class OidcProvider:
    clients: list[dict[str, Any]]
    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30) -> OidcProvider:
        self.port = free_port()
        config = {
            "module": provider_module().as_uri(),
            "issuer": self.issuer,
            "port": self.port,
            "clients": self.clients,
            "accounts": self.accounts,
        }
        self.process = subprocess.Popen(
            ["node", str(SCRIPT)],
            env={**os.environ, "OIDC_TEST_CONFIG": json.dumps(config)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        assert self.process.stdout is not None
        said = []
        for line in self.process.stdout:  # blocks on the provider's own output: READY, or it ends
            said.append(line)
            if line.strip() == "READY":
                return self
            if time.monotonic() > deadline:
                break
        self.stop()
        raise RuntimeError("oidc-provider did not start:\n" + "".join(said)[-2000:])

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


async def sign_in(authorize_url: str, login: str, redirect_prefix: str) -> str:
    """Follow `authorize_url` through the provider's login and consent pages as `login`; the URL the
    provider finally sends the browser to (under `redirect_prefix`: the console's callback)."""
    async with httpx.AsyncClient(timeout=30) as http:
        url, form = authorize_url, None
        for _ in range(20):
            response = await (http.post(url, data=form) if form is not None else http.get(url))
            form = None
            if response.is_redirect:
                url = urljoin(url, response.headers["location"])
                if url.startswith(redirect_prefix):
                    return url
                continue
            action = re.search(r'<form[^>]*action="([^"]+)"', response.text)
            prompt = re.search(r'name="prompt" value="(\w+)"', response.text)
            assert response.status_code == 200 and action and prompt, response.text[-1500:]
            url = urljoin(url, action.group(1))
            form = {"prompt": prompt.group(1), "login": login, "password": "any"}
    raise AssertionError("the provider never sent the browser back")
