"""Which environment code a run may import on this host.

Installed envs (native, or registered by an installed package's `lero.envs` entry point)
are trusted: the person installed them. A `package.module:factory` env runs its module's
code as soon as it is imported, so the host imports it only when a person named it: `--env`
on `lero run`, or on `lero resume` / `lero study` to confirm a stored one, a form field they
typed in the web UI, a chat line they typed. What they typed reaches the engine as an
explicit argument (`confirm`), never from a stored spec, a server's input or an LLM tool;
`confirm_env` turns it into the `ConfirmedEnv` that every later step is handed.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lero.graph.configuration import RunError, RunSpec
from lero.sandbox.backends import UNCONTAINED_KINDS
from lero.sandbox.cache import PROCESS_SIGNER, CacheSigner

if TYPE_CHECKING:
    from lero.training.envs.registry import ConfirmedEnv


def _registry() -> Any:
    from lero.training.envs import registry

    return registry


def confirm_hint(env: str) -> str:
    """The one line that says how a person confirms env `env`."""
    return (f"env {env!r} is not installed: importing it runs its code on this machine; "
            f"pass --env {env} to confirm it")


def confirm_env(env: str, confirm: str | None) -> ConfirmedEnv | None:
    """What running env `env` here needs: None for an installed env; for a spec, the person's
    confirmation (`confirm`, what they typed, must name it), after which its module is
    imported once from the working directory and its factory checked. RunError otherwise."""
    registry = _registry()
    installed = registry.is_installed(env)
    if confirm != env and (confirm is not None or not installed):
        raise RunError(f"the env is {env!r}, not {confirm!r}" if installed else confirm_hint(env))
    if installed:
        return None
    try:
        return registry.confirm_env(env)
    except ValueError as error:
        raise RunError(str(error)) from None


def job_env(spec: RunSpec, confirmed: ConfirmedEnv | None = None) -> dict[str, Any]:
    """The environment as a sandbox job names it: `{"name": env, **env_kwargs}`, plus the
    confirmed module's own `import_root` so a fresh process can import it. RunError for a
    spec env nobody confirmed: nothing is imported."""
    env = {"name": spec.env, **(spec.env_kwargs or {})}
    if _registry().is_installed(spec.env):
        return env
    if confirmed is None or confirmed.name != spec.env:
        raise RunError(confirm_hint(spec.env))
    return {**env, "import_root": confirmed.root}


# -- where a run connects: a URL, an executor, a cluster named by a file is the person's only
# once they give it again (or the file is one this installation signed)

KEY_FILE_VARIABLE = "LERO_KEY_FILE"  # the installation's spec-signing key (default below)
ENDPOINT_FLAGS = {"base_url": "--base-url", "executor": "--executor", "ray_address": "--ray-address",
                  "sandbox": "--sandbox"}


def key_path() -> Path:
    """The installation's signing key: `$LERO_KEY_FILE`, else `~/.config/lero/run-key`,
    outside every runs directory, so a run copied in from elsewhere carries no valid signature."""
    configured = os.environ.get(KEY_FILE_VARIABLE)
    if configured:
        return Path(configured).expanduser()
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "lero" / "run-key"


def _key(create: bool) -> bytes | None:
    path = key_path()
    try:
        return path.read_bytes()[:64] or None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(secrets.token_bytes(32))
    except FileExistsError:
        pass  # another process made it first
    except OSError:
        return None  # no writable key place: no run is signed, every resume confirms
    return _key(create=False)


def sign_spec(spec_json: bytes) -> str | None:
    """The HMAC of a spec.json this installation writes (None when no key can be kept)."""
    key = _key(create=True)
    return None if key is None else hmac.new(key, spec_json, hashlib.sha256).hexdigest()


def signed_here(spec_json: bytes, signature: str | None) -> bool:
    """Whether this installation wrote exactly these spec.json bytes. A signature that is
    not ASCII (planted bytes) is simply not this installation's: unsigned, like none."""
    key = _key(create=False)
    if key is None or not signature or not signature.isascii():
        return False
    return hmac.compare_digest(hmac.new(key, spec_json, hashlib.sha256).hexdigest(), signature.strip())


def cache_signer() -> CacheSigner:
    """What seals the result caches this installation keeps (`sandbox.cache`): derived from
    the run key, so an entry copied in from elsewhere, or edited, is refused; without a key
    place, this process's own (entries then hold within one process)."""
    key = _key(create=True)
    return PROCESS_SIGNER if key is None else CacheSigner(key)


def stored_endpoints(spec: RunSpec) -> dict[str, str]:
    """What in a spec says where the run connects: a base URL (the API key goes there), the
    ray executor, a Ray address (a Ray driver unpickles what the cluster returns), and where
    LLM code runs when that is a sandbox without a container (`UNCONTAINED_KINDS`)."""
    named = {"base_url": spec.base_url, "executor": "ray" if spec.executor == "ray" else None,
             "ray_address": spec.ray_address,
             "sandbox": spec.sandbox if spec.sandbox in UNCONTAINED_KINDS else None}
    return {field: value for field, value in named.items() if value}


def confirm_endpoints(stored: RunSpec, given: dict[str, Any], trusted: bool, command: str = "lero resume",
                      fields: tuple[str, ...] = tuple(ENDPOINT_FLAGS)) -> None:
    """RunError (one line, the confirming flag) when a spec read from a file would connect
    somewhere nobody gave again: a field of `stored_endpoints` (among the `fields` the
    command uses) not in `given` (what the person typed). A `trusted` spec (`signed_here`)
    keeps its own."""
    if trusted:
        return
    for field, value in stored_endpoints(stored).items():
        if field in fields and field not in given:
            raise RunError(f"the stored spec names {field} {value!r}, which this installation did not write: "
                           f"confirm it with {command} ... {ENDPOINT_FLAGS[field]} {value}")


# -- what only the host's operator chooses: no server request, no LLM tool may

# RunSpec fields that say where LLM code runs and where the run connects
OPERATOR_FIELDS = ("sandbox", "executor", "ray_address", "base_url")
# RunSpec budgets a request may only lower: field -> the server's variable that raises the cap
OPERATOR_CAPS = {"job_timeout_s": "LERO_MAX_JOB_TIMEOUT_S", "max_parallel": "LERO_MAX_PARALLEL",
                 "disk_budget_mb": "LERO_MAX_DISK_BUDGET_MB"}
