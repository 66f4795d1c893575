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
# workspaces (and, run alone without RATCHET_LEDGER_URL / RATCHET_ARTIFACT_URL,
# the SQLite ledger and artifact directory). docker-compose.yml shares nothing
# between replicas: the ledger is in Postgres and artifacts in S3.
RUN groupadd --system --gid 10001 ratchet \
    && useradd --system --uid 10001 --gid ratchet --home-dir /home/ratchet \
       --create-home --shell /usr/sbin/nologin ratchet \
    && mkdir -p /data/workspaces /data/artifacts /data/ledger \
    && chown -R ratchet:ratchet /data
USER ratchet:ratchet

ENV RATCHET_WORKSPACE_ROOT=/data/workspaces \
    RATCHET_ARTIFACT_DIR=/data/artifacts \
    RATCHET_LEDGER_PATH=/data/ledger/ledger.sqlite3

# Prometheus metrics (RATCHET_METRICS_PORT); informational only.
EXPOSE 9464

# `docker stop` / compose scale-down sends SIGTERM; the worker should drain
# in-flight activities before the stop_grace_period runs out.
STOPSIGNAL SIGTERM

ENTRYPOINT ["ratchet"]
CMD ["worker"]
