"""A custom env's image: `lero-sandbox-env:<digest>`, one layer on top of the base image
(`image.image_tag()`).

A PettingZoo env lero does not ship (`package.module:factory`, or a `lero.envs` entry
point) needs its own code and its requirements inside the container. They are found
without running any of the env's code: the env's top-level module is located by the
import system's finders (nothing is executed), the distribution providing it by
`packages_distributions()` (editable installs included: their top-level packages are
copied from where they really live, found through the install's finder hook or path
`.pth` by the import system's finders), its requirements from its metadata, and the imports
of the env's own files by parsing them (`ast`). The closure of those distributions minus
what the base image holds (`image.runtime_distributions`) is copied from this host's
site-packages into the image's. A module that no distribution provides (one imported from
the working directory) goes alone, that module's file or package and nothing else, to
`ENV_ROOT`, which becomes the job's `import_root` inside the container.

The layer is built offline: a container is created from the base image (never started),
the files are put into it as one tar, and it is committed. The tag is the digest of
every input (the base image's id, each destination path and its content), so a change
to the env, a dependency or the base gives a new tag and a rebuild, and an unchanged env
reuses its layer. Where Docker cannot serve the env (a compiled file listed but missing,
a shared library `ldd` cannot resolve, a distribution without a file list)
`EnvNotServed` says why in one line.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from importlib.machinery import ModuleSpec, PathFinder
from importlib.util import find_spec
from pathlib import Path
from typing import IO, Any

from lero.sandbox.image import (
    Log,
    _add,
    _add_dir,
    _requirements,
    _shared_libraries,
    _under_root,
    distribution_closure,
    image_site,
    image_tag,
    normalized,
    runtime_distributions,
    site_roots,
)
from lero.sandbox.types import SandboxUnavailable

ENV_IMAGE_REPO = "lero-sandbox-env"
ENV_ROOT = "/opt/lero-env"  # a working-directory module's files; the job's import_root inside
# the PettingZoo adapter (lero.training) imports these; the base image does not hold them
ADAPTER_DISTRIBUTIONS = ("pettingzoo", "gymnasium")
ENV_LABEL = "lero.sandbox.env"  # the env's name, to find its older layers
DIGEST_LABEL = "lero.sandbox.env-digest"
PROCESS_HINT = "choose --sandbox process to run it knowingly in the much weaker process sandbox"
COMPILED = (".so", ".pyd")
SKIPPED_PARTS = ("__pycache__",)
EDITABLE_PREFIX = "__editable__"  # setuptools' editable hooks: a finder module, a .pth


class EnvNotServed(SandboxUnavailable):
    """Docker cannot serve this env; the message says why and how to choose the process sandbox."""


@dataclass(frozen=True)
class EnvLayer:
    """What a custom env's layer holds: `files` {path in the image: host file}."""

    env: str
    files: dict[str, Path]
    digest: str
    import_root: str | None  # ENV_ROOT for a working-directory module; None when installed

    @property
    def image(self) -> str:
        return f"{ENV_IMAGE_REPO}:{self.digest}"

    def size_bytes(self) -> int:
        return sum(source.stat().st_size for source in self.files.values())


def _not_served(env: str, why: str) -> EnvNotServed:
    return EnvNotServed(f"env {env!r} cannot run in the Docker sandbox: {why}; {PROCESS_HINT}")


def _entry_point(env: dict[str, Any]) -> metadata.EntryPoint | None:
    """The `lero.envs` entry point an env name refers to; None for a `pkg.mod:factory` spec."""
    from lero.training.envs.registry import ENTRY_POINT_GROUP

    name = env["name"]
    if ":" in name:
        return None
    found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        raise _not_served(name, "no installed package registers it under lero.envs")
    return found[0]


def _import_roots() -> list[Path]:
    """Directories installed files are placed relative to: site-packages, then the rest of sys.path."""
    roots = site_roots()
    return roots + [Path(os.path.abspath(entry)) for entry in sys.path
                    if os.path.isdir(entry or ".") and Path(os.path.abspath(entry)) not in roots]


def _locate(env: dict[str, Any], top: str) -> ModuleSpec:
    """Where TOP lives, by the finders alone (nothing runs): in the confirmed import root for
    a spec, else on this interpreter's path (site-packages, editable finders)."""
    root = env.get("import_root")
    spec = PathFinder.find_spec(top, [root]) if root else None
    spec = spec or find_spec(top)
    if spec is None or not (spec.origin or spec.submodule_search_locations):
        raise _not_served(env["name"], f"its module {top!r} cannot be found")
    return spec


def _module_files(spec: ModuleSpec) -> tuple[Path, list[Path]]:
    """(the directory holding the module, its files): a package's tree or a module's file."""
    if spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations))).resolve()
        files = sorted(
            path for path in package.rglob("*")
            if path.is_file() and not set(SKIPPED_PARTS) & set(path.parts) and path.suffix != ".pyc"
        )  # fmt: skip
        return package.parent, files
    origin = Path(str(spec.origin)).resolve()
    return origin.parent, [origin]


def _imported_tops(files: list[Path]) -> set[str]:
    """Top-level names the env's own Python files import (parsed, not run)."""
    tops: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        try:
            tree = ast.parse(path.read_bytes(), str(path))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                tops.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops.add(node.module.split(".")[0])
    return tops - set(sys.stdlib_module_names)


def _providers(tops: set[str]) -> set[str]:
    mapping = metadata.packages_distributions()
    return {normalized(dist) for top in tops for dist in mapping.get(top, ())}


def _recorded_files(dist: metadata.Distribution) -> list[metadata.PackagePath] | None:
    """The files DIST's RECORD lists as written, gone ones included. Not `dist.files`: the
    importlib_metadata backport, which importing mlflow puts first on `sys.meta_path`, leaves
    out of `files` every entry whose file is gone: the missing compiled file looked for here."""
    record = dist.read_text("RECORD")
    if record is None:
        return None if dist.files is None else list(dist.files)
    return [metadata.PackagePath(row[0]) for row in csv.reader(record.splitlines()) if row]


def _dist_files(env: str, dist: metadata.Distribution, roots: list[Path]) -> dict[str, Path]:
    """{path in the image: host file} of an installed distribution, placed in the image's
    site-packages; EnvNotServed when its file list is missing or a compiled file is gone."""
    listed = _recorded_files(dist)
    if listed is None:
        raise _not_served(env, f"{dist.metadata['Name']} does not list its installed files")
    target, placed = image_site(), {}
    for file in listed:
        # RECORD's `../` entries (scripts, headers, data) lie outside site-packages and are
        # never imported; placed by a sys.path entry (a console script's bin/ heads sys.path)
        # `bin/tabulate` became a file where the package `tabulate/` goes.
        if file.parts[:1] == ("..",) or set(SKIPPED_PARTS) & set(file.parts):
            continue
        source = Path(os.path.abspath(dist.locate_file(file)))
        if source.suffix == ".pyc":
            continue
        if not source.is_file():
            if source.suffix in COMPILED or ".so." in source.name:
                raise _not_served(env, f"{dist.metadata['Name']}'s compiled file {file} is missing")
            continue
        where = _under_root(source, roots)
        if where is not None and not where[1].parts[0].startswith(EDITABLE_PREFIX):
            placed[str(target / where[1])] = source.resolve()
    hooks = [Path(os.path.abspath(dist.locate_file(file))) for file in listed
             if file.name.startswith(EDITABLE_PREFIX)]  # fmt: skip
    if hooks:
        placed.update(_editable_files(env, dist, hooks))
    return placed


def _finder_mapping(hook: Path) -> dict[str, str]:
    """A setuptools finder hook's MAPPING {top-level name: source path}, parsed, not run."""
    if not hook.name.endswith("_finder.py") or not hook.is_file():
        return {}
    for node in ast.parse(hook.read_bytes(), str(hook)).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if value is not None and any(isinstance(t, ast.Name) and t.id == "MAPPING" for t in targets):
            return {str(key): str(path) for key, path in ast.literal_eval(value).items()}
    return {}


def _editable_files(env: str, dist: metadata.Distribution, hooks: list[Path]) -> dict[str, Path]:
    """An editable install's own modules, copied from where its source lives: the top-level
    names of its finder hook's MAPPING (or its `top_level.txt`, for a path `.pth`), each located
    by this interpreter's finders (nothing runs); EnvNotServed when one cannot be found."""
    name = dist.metadata["Name"]
    tops = {top for hook in hooks for top in _finder_mapping(hook)}
    tops |= set((dist.read_text("top_level.txt") or "").split())
    if not tops:
        raise _not_served(env, f"the editable install of {name} names no module lero can find")
    placed = {}
    for top in sorted(tops):
        spec = find_spec(top)
        if spec is None or not (spec.origin or spec.submodule_search_locations):
            raise _not_served(env, f"{top!r} of the editable install of {name} cannot be found")
        parent, files = _module_files(spec)
        placed.update({str(image_site() / path.relative_to(parent)): path for path in files})
    return placed


def _ldd(path: Path) -> str:
    return subprocess.run(["ldd", str(path)], capture_output=True, text=True).stdout


def _libraries(env: str, files: dict[str, Path], roots: list[Path]) -> dict[str, Path]:
    """The shared libraries the layer's compiled files link that live outside them."""
    compiled = [src for src in files.values() if src.suffix in COMPILED or ".so." in src.name]
    if not compiled:
        return {}
    shipped = {Path(dest).name for dest in files}  # a wheel's bundled libraries (pkg.libs)
    missing = sorted(
        name for src in compiled
        for name in re.findall(r"^\s*(\S+) => not found", _ldd(src), flags=re.MULTILINE)
        if name not in shipped
    )  # fmt: skip
    if missing:
        raise _not_served(env, f"shared libraries {', '.join(missing[:3])} cannot be found")
    libraries = {}
    for lib in _shared_libraries(compiled):
        where = _under_root(lib, roots)
        libraries[str(image_site() / where[1]) if where else str(lib)] = lib.resolve()
    return libraries


def plan_layer(env: dict[str, Any], base_id: str) -> EnvLayer:
    """The layer env ENV (a job's env dict) needs on top of the base image BASE_ID."""
    name, roots, entry_point = env["name"], _import_roots(), _entry_point(env)
    top = (entry_point.module if entry_point else name.split(":")[0]).split(".")[0]
    parent, own = _module_files(_locate(env, top))
    providers = _providers({top})
    if entry_point is not None and entry_point.dist is not None:  # its metadata declares the name
        providers.add(normalized(entry_point.dist.name))
    base = {normalized(dist.metadata["Name"]) for dist in runtime_distributions()} | {"lero"}
    wanted = {*_providers(_imported_tops(own)), *ADAPTER_DISTRIBUTIONS, *providers}
    for provider in providers:
        wanted.update(_requirements(metadata.distribution(provider)))
    files: dict[str, Path] = {}
    for dist in distribution_closure(sorted(wanted - base)):
        if normalized(dist.metadata["Name"]) not in base:
            files.update(_dist_files(name, dist, roots))
    import_root = ENV_ROOT if "import_root" in env and not providers else None  # a working-directory module
    destination = Path(import_root or image_site())
    files.update({str(destination / path.relative_to(parent)): path for path in own})
    files.update({dest: src for dest, src in _libraries(name, files, roots).items() if dest not in files})
    digest = hashlib.sha256(json.dumps([base_id, ENV_ROOT], sort_keys=True).encode())
    for dest in sorted(files):
        digest.update(dest.encode() + b"\0" + hashlib.sha256(files[dest].read_bytes()).digest())
    return EnvLayer(name, files, digest.hexdigest()[:16], import_root)


def _write_archive(files: dict[str, Path], handle: IO[bytes]) -> None:
    """The layer's files as one tar (root-owned, read-only, new directories 0755)."""
    directories = {str(parent) for dest in files for parent in Path(dest).parents if str(parent) != "/"}
    with tarfile.open(fileobj=handle, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for directory in sorted(directories):
            _add_dir(tar, directory, 0o755)
        for dest, source in files.items():
            _add(tar, source, dest)
    handle.seek(0)


def base_image_id(client) -> str:
    return client.images.get(image_tag()).id


def layer_exists(client, layer: EnvLayer) -> bool:
    import docker

    try:
        image = client.images.get(layer.image)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(DIGEST_LABEL) == layer.digest


def ensure_env_layer(env: dict[str, Any], client, log: Log = print) -> EnvLayer:
    """The env's layer, built now (with a progress line) unless one with its digest exists;
    older layers of the same env are removed. EnvNotServed when Docker cannot serve it."""
    import docker

    layer = plan_layer(env, base_image_id(client))
    if layer_exists(client, layer):
        return layer
    started, base = time.monotonic(), image_tag()
    log(f"building {layer.image} for env {layer.env!r}: {len(layer.files)} files, "
        f"{layer.size_bytes() / 2**20:.1f} MiB on {base} ...")  # fmt: skip
    container = client.containers.create(base, ["true"], network_disabled=True)
    try:
        with tempfile.TemporaryFile(prefix="lero-env-layer-") as archive:  # streamed, never in memory
            _write_archive(layer.files, archive)
            container.put_archive("/", archive)
        container.commit(
            repository=ENV_IMAGE_REPO, tag=layer.digest,
            changes=['CMD ["python"]', f"LABEL {ENV_LABEL}={json.dumps(layer.env)}",
                     f"LABEL {DIGEST_LABEL}={layer.digest}"],
        )  # fmt: skip
    except docker.errors.DockerException as error:
        raise _not_served(layer.env, f"building its layer failed: {error}".splitlines()[0]) from error
    finally:
        container.remove(force=True)
    for old in client.images.list(name=ENV_IMAGE_REPO, filters={"label": f"{ENV_LABEL}={layer.env}"}):
        if layer.image not in old.tags:
            try:
                client.images.remove(old.id)
            except docker.errors.APIError:
                continue  # a container of another run still uses it
    log(f"built {layer.image} in {time.monotonic() - started:.1f} s")
    return layer
