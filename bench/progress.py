"""A progress display on stderr: `[ 7/31 02:14 ~05:40 left] step cost: ratchet N=20 rep 2 ... 91 ms/step`."""

from __future__ import annotations

import sys
import time


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60):02d}:{int(seconds % 60):02d}"


class Progress:
    def __init__(self, total: int, stream=sys.stderr, quiet: bool = False) -> None:
        self.total, self.done, self.stream, self.quiet = max(total, 1), 0, stream, quiet
        self.began = time.monotonic()

    def _head(self) -> str:
        elapsed = time.monotonic() - self.began
        left = elapsed / self.done * (self.total - self.done) if self.done else 0.0
        eta = f" ~{_clock(left)} left" if self.done else ""
        return f"[{self.done:>3}/{self.total} {_clock(elapsed)}{eta}]"

    def begin(self, what: str) -> None:
        self._print(f"{self._head()} {what} ...", end="")

    def end(self, outcome: str) -> None:
        self.done += 1
        self._print(f" {outcome}")

    def note(self, line: str) -> None:
        self._print(f"{self._head()} {line}")

    def _print(self, text: str, end: str = "\n") -> None:
        if not self.quiet:
            print(text, end=end, file=self.stream, flush=True)
