"""A real Azure Blob Storage endpoint for tests: Azurite, Microsoft's emulator, from npm (no root,
no Docker): installed once into ~/.cache/ratchet/azurite (RATCHET_AZURITE_DIR), about 25 s and
60 MB; tests that need it skip when neither it nor npm is there.

`azurite-blob` bound to 127.0.0.1 on a free port, its data in a temporary directory, the emulator's
well-known account (devstoreaccount1) and key. Ready (container created) in about a second.

Use the session fixture `azurite_server` (tests/conftest.py registers this module as a plugin).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from devtools.devserver import free_port

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
"""The emulator's documented account key (not a secret)."""
VERSION = "3"


def azurite_binary() -> Path:
    """`azurite-blob`, installed from npm into the cache directory first if it is not there."""
    root = Path(os.environ.get("RATCHET_AZURITE_DIR") or Path.home() / ".cache" / "ratchet" / "azurite")
    binary = root / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("Azurite is not installed and there is no npm to install it (Node.js 18 or later)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:  # pytest-xdist's workers install it once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not binary.exists():
            done = subprocess.run([npm, "install", "--prefix", str(root), "--no-audit", "--no-fund",
                                   f"azurite@{VERSION}"], capture_output=True, text=True, timeout=600)
            if done.returncode != 0 or not binary.exists():
                raise RuntimeError(f"npm install azurite failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return binary


@dataclass
class Azurite:
    root: Path
    container: str = "ratchet-test"
    port: int = 0
    process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def env(self) -> dict[str, str]:
        """AZURE_* variables that point obstore (and the Azure SDKs) here."""
        return {"AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT, "AZURE_STORAGE_ACCOUNT_KEY": KEY,
                "AZURE_STORAGE_ENDPOINT": self.endpoint}

    def client(self) -> Any:
        """The Azure SDK's container client (not Ratchet's), to set up and tamper with blobs."""
        from azure.storage.blob import BlobServiceClient

        service = BlobServiceClient(self.endpoint, credential={"account_name": ACCOUNT, "account_key": KEY})
        return service.get_container_client(self.container)

    def start(self, timeout_s: float = 30) -> Azurite:
        binary = azurite_binary()
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        log = open(self.root / "azurite.log", "ab")
        self.process = subprocess.Popen(
            [str(binary), "--silent", "--location", str(self.root / "data"), "--blobHost", "127.0.0.1",
             "--blobPort", str(self.port), "--skipApiVersionCheck"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"Azurite did not start; log:\n{(self.root / 'azurite.log').read_text()[-2000:]}") from None
                time.sleep(0.1)
        self.client().create_container()
        return self

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Azurite:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@pytest.fixture(scope="session")
def azurite_server(tmp_path_factory: pytest.TempPathFactory):
    """One Azurite blob server for the session, container `server.container` created."""
    with Azurite(tmp_path_factory.mktemp("azurite")) as server:
        yield server
