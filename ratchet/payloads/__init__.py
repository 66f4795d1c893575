"""What payloads look like on the wire: the data converter (pydantic JSON), AES-GCM encryption
with key ids, offloading large payloads to the artifact store (a Temporal external-storage driver),
and the codec server for the Web UI."""
