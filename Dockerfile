# Ratchet worker image.
#
#   docker build -t ratchet .
#   docker run --rm ratchet            # == `ratchet worker`
#   docker run --rm ratchet config     # any other `ratchet` subcommand
#
# docker-compose.yml builds this image for the `worker` service.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Install the distribution (ratchet-agents) and its `ratchet` console script.
# README*/LICENSE* are wildcards so the build works whether or not
# pyproject.toml refers to them.
COPY pyproject.toml README* LICENSE* ./
COPY ratchet/ ./ratchet/
COPY workflows/ ./workflows/
COPY activities/ ./activities/
COPY worker/ ./worker/
RUN pip install ".[otel,postgres,s3]" \
    && rm -rf /app/build /app/*.egg-info

# Unprivileged runtime user. /data holds what is local to one worker: its run
# workspaces (and, run alone without RATCHET_LEDGER_URL / RATCHET_ARTIFACT_URL /
# RATCHET_TRACKER_URL, the SQLite ledger, the artifact directory and the example
# tracker's SQLite file). docker-compose.yml shares nothing between replicas
# but Postgres (ledger, tracker) and S3 (artifacts). /app is root's: nothing is
# written there.
RUN groupadd --system --gid 10001 ratchet \
    && useradd --system --uid 10001 --gid ratchet --home-dir /home/ratchet \
       --create-home --shell /usr/sbin/nologin ratchet \
    && mkdir -p /data/workspaces /data/artifacts /data/ledger /data/tracker \
    && chown -R ratchet:ratchet /data
USER ratchet:ratchet

ENV RATCHET_WORKSPACE_ROOT=/data/workspaces \
    RATCHET_ARTIFACT_DIR=/data/artifacts \
    RATCHET_LEDGER_PATH=/data/ledger/ledger.sqlite3 \
    RATCHET_TRACKER_PATH=/data/tracker/tracker.sqlite3

# Temporal, the ledger, the artifact store and the tracker answer (ratchet/cli/health.py).
HEALTHCHECK --interval=30s --timeout=10s --start-period=20s --retries=3 CMD ["ratchet", "health", "--timeout", "5"]

# Prometheus metrics (RATCHET_METRICS_PORT); informational only.
EXPOSE 9464

# `docker stop` / compose scale-down sends SIGTERM; the worker should drain
# in-flight activities before the stop_grace_period runs out.
STOPSIGNAL SIGTERM

ENTRYPOINT ["ratchet"]
CMD ["worker"]
