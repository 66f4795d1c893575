"""What payloads look like on the wire: the data converter (pydantic JSON), AES-GCM encryption
with key ids, the claim check for large payloads, and the codec server for the Web UI."""
