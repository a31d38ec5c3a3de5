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

from typing import TYPE_CHECKING, Any

from lero.graph.configuration import RunError, RunSpec

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
