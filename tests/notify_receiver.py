"""A webhook receiver for tests/test_notify.py, run as its own process: `python -m
tests.notify_receiver PORT FILE SECRET`. Each POST is a line of FILE (its Idempotency-Key, event,
whether its X-Hub-Signature-256 matches SECRET, its body), answered 200; a key it has seen is
answered 200 and not written again (what a receiver that stores the key does)."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, FILE, SECRET = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802  (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        key = self.headers.get("Idempotency-Key", "")
        expected = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        seen = {json.loads(line)["key"] for line in open(FILE)} if _exists() else set()
        if key not in seen:
            line = {
                "key": key,
                "event": self.headers.get("X-Ratchet-Event"),
                "signed": hmac.compare_digest(self.headers.get("X-Hub-Signature-256", ""), expected),
                "body": json.loads(body),
            }
            with open(FILE, "a") as out:
                out.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _exists() -> bool:
    try:
        open(FILE).close()
        return True
    except FileNotFoundError:
        return False


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
    print(f"receiver on {PORT}", flush=True)
    server.serve_forever()
