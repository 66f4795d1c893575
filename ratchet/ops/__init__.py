"""Operating a worker: settings from the environment (errors name the variable), JSON logs,
Prometheus metrics, OpenTelemetry tracing, secret redaction, and exiting with the true status."""
