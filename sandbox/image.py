"""The sandbox image: built offline from the host's Python (default), or from `sandbox/Dockerfile`.

Offline (default, no registry needed): a root filesystem is assembled from this
interpreter and `docker import`ed: `sys.base_prefix` (stdlib without tests/tk/static
libs), the site-packages entries that the sandboxed runner really imports (measured by
importing it in a child interpreter) wherever they are installed (venv, system, `--user`),
placed in the image interpreter's own site-packages, the shared libraries they link
(`ldd`; those inside a site-packages move with their package), and /etc/passwd with the
unprivileged user. Every path goes into the image once. `dockerfile` (only when asked:
it needs a registry) builds python:3.11-slim + CPU torch. Both give the same user, working
dir and environment. The lero source (`training`, `sandbox`) is not baked
in: it is mounted read-only at run time (`CODE_MOUNT`), so code changes never need a
rebuild.

Lifecycle: the image carries a label with what went into it (`image_inputs`: lero
version, Python, the runtime distributions and their versions, the recipe or the
Dockerfile) and its tag is the digest of that, `lero-sandbox:<digest12>` (`image_tag`).
Another venv, or a package installed into this one, gives other inputs and so another
tag beside this one: a build never replaces an image that another process's run is
using, and no image is removed automatically (`docker image rm` old `lero-sandbox:*`
tags by hand). Builds take a host-wide file lock (`BUILD_LOCK`): two runs starting
together with the same inputs build once, the second waits and then finds it built.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import json
import os
import platform
import re
import site
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from lero.sandbox.types import JOB_PROCESS_ENV, SandboxUnavailable

IMAGE_REPO = "lero-sandbox"  # tagged `<digest12>` of its inputs: `image_tag()`
SANDBOX_UID = 10001
CODE_MOUNT = "/opt/lero"  # on PYTHONPATH; the packages are mounted read-only at lero/<package>
CODE_PACKAGES = ("training", "sandbox")
REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE_DIR = Path(__file__).resolve().parent
IMAGE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONPATH": CODE_MOUNT,
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HOME": "/tmp",
    **JOB_PROCESS_ENV,
}
# Modules the runner imports, whose site-packages closure goes into the offline image.
RUNTIME_MODULES = ("numpy", "torch", "lero.sandbox.harness", "lero.training")
# ... plus these distributions and their requirements: torch imports some lazily (sympy);
# vmas (the `vmas` extra, skipped when not installed) runs `vmas:<scenario>` envs natively.
RUNTIME_DISTRIBUTIONS = ("torch", "numpy", "vmas")
STDLIB_EXCLUDES = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
    "dist-packages",
}
PACKAGE_EXCLUDES = re.compile(  # headers, static libs, tests, torch's test binaries
    r"(^|/)(include|share/cmake|test|tests)(/|$)|\.(a|h|hpp|cuh|pyi)$|(^|/)bin/(test_\w*|\w*Test|protoc\S*)$"
)
INPUTS_LABEL = "lero.sandbox.inputs"  # JSON of `image_inputs(mode)` at build time
BUILD_MODES = ("offline", "dockerfile", "auto")  # `auto`: the old spelling of `offline`
BUILD_LOCK = Path(tempfile.gettempdir()) / "lero-sandbox-build.lock"
START_DOCKER_HINT = "start one (`sudo systemctl start docker`, or `sudo dockerd &`)"

Log = Callable[[str], None]


def docker_client():  # -> docker.DockerClient
    """A client for the local daemon, or `SandboxUnavailable` saying why not."""
    import docker

    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as error:  # any failure here means: no usable daemon
        raise SandboxUnavailable(
            f"no Docker daemon answers ({type(error).__name__}); {START_DOCKER_HINT} "
            "or use --sandbox process"
        ) from error
    return client


def require_image(client, image: str) -> str:
    """Never let Docker pull: the image must exist locally. Returns its ID, which containers
    are created from, so an image tagged over it later is never the one that runs."""
    import docker

    try:
        return client.images.get(image).id
    except docker.errors.ImageNotFound:
        raise SandboxUnavailable(
            f"sandbox image {image} not found locally; build it with `lero sandbox build` "
            "(or `python -m lero.sandbox build`)"
        ) from None


# ---------------------------------------------------------------- lifecycle


def _mode(mode: str) -> str:
    if mode not in BUILD_MODES:
        raise ValueError(f"build mode must be one of {', '.join(BUILD_MODES)}, got {mode!r}")
    return "offline" if mode == "auto" else mode


def _requirements(dist: metadata.Distribution) -> list[str]:
    """Names of DIST's requirements that apply here (markers evaluated, extras skipped)."""
    from packaging.requirements import Requirement

    names = []
    for text in dist.requires or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(requirement.name)
    return names


def normalized(name: str) -> str:
    """A distribution name as PEP 503 compares them (`Typing_Extensions` = `typing-extensions`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_closure(names: Iterable[str]) -> list[metadata.Distribution]:
    """The distributions NAMES and their requirement closure, as this interpreter resolves them
    (names not installed here are skipped)."""
    todo, seen, found = list(names), set(), []
    while todo:
        name = normalized(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(dist)
        todo.extend(_requirements(dist))
    return found


def runtime_distributions() -> list[metadata.Distribution]:
    """RUNTIME_DISTRIBUTIONS and their requirement closure: what the base image holds."""
    return distribution_closure(RUNTIME_DISTRIBUTIONS)


def _lero_version() -> str:
    try:
        return metadata.version("lero")
    except metadata.PackageNotFoundError:
        return "source"


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def image_inputs(mode: str = "offline") -> dict[str, Any]:
    """What a build in MODE would put into the image; the image is labelled with it."""
    mode = _mode(mode)
    inputs: dict[str, Any] = {"mode": mode, "lero": _lero_version()}
    if mode == "dockerfile":
        inputs["dockerfile"] = _digest((DOCKERFILE_DIR / "Dockerfile").read_text())
        return inputs
    inputs["python"] = (
        f"{platform.python_implementation()} {platform.python_version()} {platform.machine()}"
    )
    inputs["distributions"] = sorted(
        f"{dist.metadata['Name'].lower()}=={dist.version}" for dist in runtime_distributions()
    )
    inputs["recipe"] = _digest(
        [RUNTIME_MODULES, RUNTIME_DISTRIBUTIONS, sorted(STDLIB_EXCLUDES), PACKAGE_EXCLUDES.pattern,
         IMAGE_ENV, SANDBOX_UID, CODE_MOUNT, CODE_PACKAGES]
    )  # fmt: skip
    return inputs


def image_tag(mode: str = "offline") -> str:
    """The tag a build in MODE on this host gives: `lero-sandbox:<digest12>` of `image_inputs`.

    A run uses `image_tag()` (the offline build of this interpreter's runtime packages)."""
    return f"{IMAGE_REPO}:{_digest(image_inputs(mode))[:12]}"


@dataclass(frozen=True)
class ImageState:
    """`current`, `stale` (built from other inputs) or `missing`, and a one-line why."""

    status: str
    detail: str


def _differences(recorded: dict[str, Any], expected: dict[str, Any]) -> str:
    changes = []
    for key in sorted(expected.keys() | recorded.keys()):
        old, new = recorded.get(key), expected.get(key)
        if old == new:
            continue
        if isinstance(old, list) and isinstance(new, list):
            gone, added = sorted(set(old) - set(new)), sorted(set(new) - set(old))
            changes.append(
                f"{key}: -{' -'.join(gone[:3])} +{' +'.join(added[:3])}".replace(" -+", " +")
            )
        else:
            changes.append(f"{key}: {old} -> {new}")
    return "; ".join(changes)


def image_state(client, tag: str | None = None) -> ImageState:
    """Is TAG (default `image_tag()`) built, from the inputs this host would put in now?
    Judged by its inputs label (an image under the tag from an older lero may lack it)."""
    import docker

    tag = tag or image_tag()
    try:
        image = client.images.get(tag)
    except docker.errors.ImageNotFound:
        return ImageState("missing", f"{tag} is not built yet")
    try:
        recorded = json.loads((image.labels or {}).get(INPUTS_LABEL) or "{}")
    except ValueError:
        recorded = {}
    if not isinstance(recorded, dict) or recorded.get("mode") not in ("offline", "dockerfile"):
        return ImageState("stale", f"{tag} has no valid {INPUTS_LABEL} label (an older build)")
    expected = image_inputs(recorded["mode"])
    if recorded == expected:
        return ImageState(
            "current", f"{tag} matches lero {expected['lero']} ({expected['mode']} build)"
        )
    return ImageState(
        "stale", f"{tag} was built from other inputs ({_differences(recorded, expected)})"
    )


@contextlib.contextmanager
def _build_lock() -> Iterator[None]:
    """One build at a time on this host (two runs starting together build once)."""
    with open(BUILD_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_image(log: Log = print, client=None) -> ImageState:
    """Build `image_tag()` (offline, with progress lines) when it is missing or stale.

    Returns the state found before any build. The check is repeated under the build lock,
    so a process that waited for another's build of the same tag does not build again.
    `SandboxUnavailable` when no daemon answers or the build fails.
    """
    import docker

    client = client or docker_client()
    state = image_state(client)
    if state.status == "current":
        return state
    with _build_lock():
        if image_state(client).status == "current":  # another process built it meanwhile
            return state
        log(f"sandbox image {state.detail}; building it now from this Python (about a minute) ...")
        try:
            _build("offline", log, client)
        except (OSError, subprocess.SubprocessError, docker.errors.DockerException) as error:
            raise SandboxUnavailable(
                f"building {image_tag()} failed: {error}".splitlines()[0]
            ) from error
    return state


# ---------------------------------------------------------------- build


def build_image(mode: str = "offline", log: Log = print, client=None) -> str:
    """Build `image_tag(MODE)` in MODE (`offline`, the default and `auto`; or `dockerfile`),
    under the build lock; logs its size and returns the tag."""
    client = client or docker_client()
    with _build_lock():
        return _build(_mode(mode), log, client)


def _build(mode: str, log: Log, client) -> str:
    tag = image_tag(mode)
    started = time.monotonic()
    if mode == "dockerfile":
        try:
            _build_from_dockerfile(client, tag, log)
        except Exception as error:
            raise SandboxUnavailable(f"docker build failed: {error}".splitlines()[0]) from error
    else:
        _build_offline(client, tag, log)
    size_mb = client.images.get(tag).attrs["Size"] / 1e6
    log(
        f"built {tag} ({mode}) in {time.monotonic() - started:.0f} s: image size {size_mb:.0f} MB"
    )
    return tag


def _build_from_dockerfile(client, tag: str, log: Log) -> None:
    log(f"building {tag} from {DOCKERFILE_DIR / 'Dockerfile'} (needs a registry)")
    client.images.build(
        path=str(DOCKERFILE_DIR),
        dockerfile="Dockerfile",
        tag=tag,
        rm=True,
        labels={INPUTS_LABEL: json.dumps(image_inputs("dockerfile"), sort_keys=True)},
    )


def _build_offline(client, name: str, log: Log) -> None:
    inputs = json.dumps(image_inputs("offline"), sort_keys=True)
    with tempfile.TemporaryDirectory(prefix="lero-image-") as tmp:
        tar_path = Path(tmp) / "rootfs.tar"
        n_files = _write_rootfs(tar_path, log)
        log(f"rootfs: {n_files} files, {tar_path.stat().st_size / 2**20:.0f} MiB; importing")
        changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
        changes += [f"USER {SANDBOX_UID}:{SANDBOX_UID}", "WORKDIR /job", 'CMD ["python"]']
        changes.append(f"LABEL {INPUTS_LABEL}={json.dumps(inputs)}")
        repository, tag = name.rsplit(":", 1)
        client.api.import_image_from_file(
            str(tar_path), repository=repository, tag=tag, changes=changes
        )


def site_roots() -> list[Path]:
    """Every site-packages directory this interpreter imports from: venv, system, user, and
    those a `.pth` file adds (a virtualenv layered on another one)."""
    candidates = [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    ]
    if site.ENABLE_USER_SITE:
        candidates.append(site.getusersitepackages())
    candidates += [entry for entry in sys.path if Path(entry).name in ("site-packages", "dist-packages")]
    roots: list[Path] = []
    for candidate in candidates:
        path = Path(os.path.abspath(candidate))
        if path.is_dir() and path not in roots:
            roots.append(path)
    return roots


def image_site() -> Path:
    """Where the image's interpreter (this one's base installation) finds site-packages."""
    return Path(site.getsitepackages([sys.base_prefix])[0])


def _under_root(path: Path, roots: list[Path]) -> tuple[Path, Path] | None:
    """(root, path relative to it) for the deepest site root holding PATH (as given or resolved)."""
    for candidate in dict.fromkeys((path, path.resolve())):
        matches = [root for root in roots if root in candidate.parents]
        matches += [root.resolve() for root in roots if root.resolve() in candidate.parents]
        if matches:
            root = max(matches, key=lambda r: len(r.parts))
            return root, candidate.relative_to(root)
    return None


def _not_runtime(name: str) -> bool:
    """Site entries never copied: metadata, caches, .pth hooks, lero itself (mounted at run time)."""
    return (
        name in ("lero", "__pycache__")
        or name.startswith("__editable__")
        or name.endswith((".dist-info", ".pth"))
    )


def _runtime_site_entries(roots: list[Path]) -> list[Path]:
    """Top-level site-packages entries the runner imports (measured in a child interpreter),
    plus those of `runtime_distributions()`; one per name, the one imports resolve first."""
    probe = (
        "import importlib, json, sys\n"
        f"for name in {RUNTIME_MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    files = [Path(os.path.abspath(f)) for f in json.loads(output.splitlines()[-1]) if f]
    for dist in runtime_distributions():
        files += [Path(os.path.abspath(dist.locate_file(file))) for file in dist.files or []]
    entries: dict[str, Path] = {}
    for file in files:
        placed = _under_root(file, roots)
        if placed is None or _not_runtime(placed[1].parts[0]):
            continue
        root, relative = placed
        entries.setdefault(relative.parts[0], root / relative.parts[0])
    for name, entry in list(entries.items()):  # bundled shared libraries of wheels, e.g. numpy.libs
        libs = entry.parent / f"{name}.libs"
        if libs.is_dir():
            entries.setdefault(libs.name, libs)
    return [entries[name] for name in sorted(entries)]


def _walk(root: Path, exclude: Callable[[str], bool]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [
            d for d in dirnames if not exclude(os.path.normpath(os.path.join(rel_dir, d)))
        ]
        for name in filenames:
            if not exclude(os.path.normpath(os.path.join(rel_dir, name))):
                yield Path(dirpath) / name


def _shared_libraries(elf_files: list[Path]) -> set[Path]:
    """Every library `ldd` resolves for the given binaries, plus the dynamic loader."""
    libs: set[Path] = set()
    for start in range(0, len(elf_files), 200):
        batch = [str(p) for p in elf_files[start : start + 200]]
        output = subprocess.run(["ldd", *batch], capture_output=True, text=True).stdout
        for match in re.finditer(r"(?:=>\s*)?(/\S+)\s+\(0x", output):
            libs.add(Path(os.path.normpath(match.group(1))))
    return libs


def rootfs_files(log: Log = print) -> dict[str, Path]:
    """{path in the image: host file}: interpreter, stdlib, runtime packages, shared libraries.

    Keyed by destination, so each path is written once. Packages from any site root
    (venv, system, `--user`) go into the image interpreter's site-packages, and a library
    `ldd` finds inside a site root goes with its package instead of to its host path.
    """
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths(vars={"installed_base": sys.base_prefix})["stdlib"])
    target_site = image_site()
    files: dict[str, Path] = {str(prefix / "bin" / version): Path(sys.executable).resolve()}
    skip_stdlib = lambda rel: rel.split("/")[0] in STDLIB_EXCLUDES or rel.startswith("config-")  # noqa: E731
    for path in _walk(stdlib, skip_stdlib):
        files.setdefault(str(path), path)
    roots = site_roots()
    for entry in _runtime_site_entries(roots):
        if entry.is_file():
            files.setdefault(str(target_site / entry.name), entry)
            continue
        for path in _walk(entry, lambda rel: bool(PACKAGE_EXCLUDES.search(rel))):
            files.setdefault(str(target_site / entry.name / path.relative_to(entry)), path)
    elf_files = [
        src
        for src in files.values()
        if src.suffix == ".so" or ".so." in src.name or src.name.startswith("python")
    ]
    log(f"resolving shared libraries of {len(elf_files)} binaries")
    for lib in sorted(_shared_libraries(elf_files)):
        placed = _under_root(lib, roots)
        dest = target_site / placed[1] if placed else lib
        files.setdefault(str(dest), lib)
    return {dest: source.resolve() for dest, source in files.items()}


def _add(tar: tarfile.TarFile, source: Path, arcname: str) -> None:
    info = tar.gettarinfo(str(source), arcname=arcname.lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = (info.mode & 0o755) | 0o444
    with source.open("rb") as handle:
        tar.addfile(info, handle)


def _add_text(tar: tarfile.TarFile, arcname: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(arcname.lstrip("/"))
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, arcname: str, mode: int) -> None:
    info = tarfile.TarInfo(arcname.lstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _write_rootfs(tar_path: Path, log: Log) -> int:
    """The image's root filesystem as a tar, each path once; returns the number of files copied."""
    files = rootfs_files(log)
    interpreter = next(iter(files))
    generated = {"/etc/passwd", "/etc/group", "/usr/local/bin/python", "/usr/local/bin/python3"}
    files = {dest: source for dest, source in files.items() if dest not in generated}
    directories = {"/job": 0o755, "/etc": 0o755, "/usr/local/bin": 0o755, CODE_MOUNT: 0o755}
    directories |= {f"{CODE_MOUNT}/lero": 0o755} | {
        f"{CODE_MOUNT}/lero/{p}": 0o755 for p in CODE_PACKAGES
    }
    for dest in [*files, *directories]:
        for parent in Path(dest).parents:
            if str(parent) != "/":
                directories.setdefault(str(parent), 0o755)
    directories["/tmp"] = 0o1777
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        for directory in sorted(directories):  # parents sort before their children
            _add_dir(tar, directory, directories[directory])
        for dest, source in files.items():
            _add(tar, source, dest)
        for alias in ("python", "python3"):
            link = tarfile.TarInfo(f"usr/local/bin/{alias}")
            link.type, link.linkname = tarfile.SYMTYPE, interpreter
            tar.addfile(link)
        users = f"root:x:0:0::/root:/nonexistent\nlero:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/nonexistent\n"
        _add_text(tar, "/etc/passwd", users)
        _add_text(tar, "/etc/group", f"root:x:0:\nlero:x:{SANDBOX_UID}:\n")
    return len(files)
