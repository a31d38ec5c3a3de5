"""The sandbox image: built from `sandbox/Dockerfile`, or offline from the host's Python.

With a registry, `docker build` of the Dockerfile (python:3.11-slim + CPU torch). Without
one (CI, air-gapped machines) a root filesystem is assembled from this interpreter:
`sys.base_prefix` (stdlib without tests/tk/static libs), the site-packages that the
sandboxed runner really imports (measured by importing it in a child interpreter), the
shared libraries they link (`ldd`), and /etc/passwd with the unprivileged user; the tar
is `docker import`ed. Both give the same tag, `IMAGE`, with the same user, working dir
and environment. The lero source (`training`, `sandbox`) is not baked in: it is mounted
read-only at run time (`CODE_MOUNT`), so code changes never need a rebuild.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path

from lero.sandbox.types import SandboxUnavailable

IMAGE_REPO = "lero-sandbox"
IMAGE_VERSION = "1"
IMAGE = f"{IMAGE_REPO}:{IMAGE_VERSION}"
SANDBOX_UID = 10001
CODE_MOUNT = "/opt/lero"  # on PYTHONPATH; the packages are mounted read-only as its `lero/<package>`
CODE_PACKAGES = ("training", "sandbox")
REPO_ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE_DIR = Path(__file__).resolve().parent
IMAGE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "PYTHONPATH": CODE_MOUNT,
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "HOME": "/tmp",
    "OMP_NUM_THREADS": "1",
    "OMP_WAIT_POLICY": "PASSIVE",
    "MKL_NUM_THREADS": "1",
}
# Modules the runner imports, whose site-packages closure goes into the offline image.
RUNTIME_MODULES = ("numpy", "torch", "lero.sandbox.runner", "lero.training")
# ... plus these distributions and their requirements: torch imports some lazily (sympy).
RUNTIME_DISTRIBUTIONS = ("torch", "numpy")
STDLIB_EXCLUDES = {
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "site-packages",
}
PACKAGE_EXCLUDES = re.compile(  # headers, static libs, tests, torch's test binaries
    r"(^|/)(include|share/cmake|test|tests)(/|$)|\.(a|h|hpp|cuh|pyi)$|(^|/)bin/(test_\w*|\w*Test|protoc\S*)$"
)

Log = Callable[[str], None]


def docker_client():  # -> docker.DockerClient
    """A client for the local daemon, or `SandboxUnavailable` saying why not."""
    import docker

    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as error:  # any failure here means: no usable daemon
        raise SandboxUnavailable(
            f"no Docker daemon answers ({type(error).__name__}); start dockerd or use --sandbox process"
        ) from error
    return client


def image_exists(client) -> bool:
    import docker

    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return False
    return True


def require_image(client) -> None:
    """Never let Docker pull: the image must exist locally."""
    if not image_exists(client):
        raise SandboxUnavailable(
            f"sandbox image {IMAGE} not found locally; build it with `lero sandbox build` "
            "(or `python -m lero.sandbox build`)"
        )


def build_image(mode: str = "auto", log: Log = print) -> str:
    """Build `IMAGE`; mode `dockerfile`, `offline`, or `auto` (Dockerfile, else offline)."""
    if mode not in ("auto", "dockerfile", "offline"):
        raise ValueError(f"build mode must be auto, dockerfile or offline, got {mode!r}")
    client = docker_client()
    if mode in ("auto", "dockerfile"):
        try:
            return _build_from_dockerfile(client, log)
        except Exception as error:
            if mode == "dockerfile":
                raise SandboxUnavailable(f"docker build failed: {error}".splitlines()[0]) from error
            log(f"Dockerfile build failed ({str(error).splitlines()[0][:120]}); building offline")
    return _build_offline(client, log)


def _build_from_dockerfile(client, log: Log) -> str:
    log(f"building {IMAGE} from {DOCKERFILE_DIR / 'Dockerfile'}")
    client.images.build(path=str(DOCKERFILE_DIR), dockerfile="Dockerfile", tag=IMAGE, rm=True)
    return IMAGE


def _build_offline(client, log: Log) -> str:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="lero-image-") as tmp:
        tar_path = Path(tmp) / "rootfs.tar"
        n_files = _write_rootfs(tar_path, log)
        log(f"rootfs: {n_files} files, {tar_path.stat().st_size / 2**20:.0f} MiB; importing")
        changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
        changes += [f"USER {SANDBOX_UID}:{SANDBOX_UID}", "WORKDIR /job", 'CMD ["python"]']
        client.api.import_image_from_file(
            str(tar_path), repository=IMAGE_REPO, tag=IMAGE_VERSION, changes=changes
        )
    log(f"built {IMAGE} offline in {time.monotonic() - started:.0f} s")
    return IMAGE


def _runtime_site_dirs() -> list[Path]:
    """Top-level site-packages entries the runner imports, measured in a child interpreter."""
    probe = (
        "import importlib, json, sys\n"
        f"for name in {RUNTIME_MODULES!r}: importlib.import_module(name)\n"
        "print(json.dumps([getattr(m, '__file__', None) for m in list(sys.modules.values())]))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    ).stdout
    site_roots = [
        Path(p) for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    ]
    entries: set[Path] = set()
    for file in json.loads(output.splitlines()[-1]):
        if not file:
            continue
        path = Path(file)
        for root in site_roots:
            if root in path.parents:
                entries.add(root / path.relative_to(root).parts[0])
    entries |= _distribution_entries(site_roots)
    for entry in list(entries):  # bundled shared libraries of wheels, e.g. numpy.libs
        libs = entry.parent / f"{entry.name}.libs"
        if libs.is_dir():
            entries.add(libs)
    return sorted(entries)


def _distribution_entries(site_roots: list[Path]) -> set[Path]:
    """Top-level site-packages entries of RUNTIME_DISTRIBUTIONS and their requirement closure."""
    todo, seen, entries = list(RUNTIME_DISTRIBUTIONS), set(), set()
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                todo.append(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))
        for file in dist.files or []:
            located = Path(dist.locate_file(file)).resolve()
            for root in site_roots:
                if root in located.parents:
                    top = root / located.relative_to(root).parts[0]
                    if not top.name.endswith(".dist-info"):
                        entries.add(top)
    return entries


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


def _add(tar: tarfile.TarFile, source: Path, arcname: str) -> None:
    source = source.resolve()
    info = tar.gettarinfo(str(source), arcname=arcname.lstrip("/"))
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = (info.mode & 0o755) | 0o444 | (0o111 if info.isdir() else 0)
    if info.isreg():
        with source.open("rb") as handle:
            tar.addfile(info, handle)
    else:
        tar.addfile(info)


def _add_text(tar: tarfile.TarFile, arcname: str, text: str) -> None:
    data = text.encode()
    info = tarfile.TarInfo(arcname.lstrip("/"))
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, arcname: str, mode: int = 0o755) -> None:
    info = tarfile.TarInfo(arcname.lstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, mode
    tar.addfile(info)


def _rootfs_files(log: Log) -> list[tuple[Path, str]]:
    """(host file, path in the image): interpreter, stdlib, runtime packages, shared libs."""
    prefix = Path(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = prefix / "lib" / version
    image_site = stdlib / "site-packages"
    files = [(Path(sys.executable).resolve(), str(prefix / "bin" / version))]
    skip_stdlib = lambda rel: rel.split("/")[0] in STDLIB_EXCLUDES or rel.startswith("config-")  # noqa: E731
    files += [(path, str(path)) for path in _walk(stdlib, skip_stdlib)]
    for entry in _runtime_site_dirs():
        if entry.is_file():
            files.append((entry, str(image_site / entry.name)))
            continue
        for path in _walk(entry, lambda rel: bool(PACKAGE_EXCLUDES.search(rel))):
            files.append((path, str(image_site / entry.name / path.relative_to(entry))))
    elf_files = [
        src
        for src, _ in files
        if src.suffix == ".so" or ".so." in src.name or src.name.startswith("python")
    ]
    log(f"resolving shared libraries of {len(elf_files)} binaries")
    seen = {dest for _, dest in files}
    for lib in sorted(_shared_libraries(elf_files)):
        if str(lib) not in seen:
            files.append((lib.resolve(), str(lib)))
            seen.add(str(lib))
    return files


def _write_rootfs(tar_path: Path, log: Log) -> int:
    """The image's root filesystem as a tar; returns the number of files copied."""
    files = _rootfs_files(log)
    interpreter = files[0][1]
    mount_points = (
        "/job",
        "/etc",
        "/usr/local/bin",
        CODE_MOUNT,
        f"{CODE_MOUNT}/lero",
        *(f"{CODE_MOUNT}/lero/{p}" for p in CODE_PACKAGES),
    )
    with tarfile.open(tar_path, "w", format=tarfile.GNU_FORMAT) as tar:
        made_dirs: set[str] = set()
        for _, dest in files:
            for parent in reversed(Path(dest).parents):
                if str(parent) != "/" and str(parent) not in made_dirs:
                    made_dirs.add(str(parent))
                    _add_dir(tar, str(parent))
        for directory in mount_points:
            if directory not in made_dirs:
                _add_dir(tar, directory)
        _add_dir(tar, "/tmp", 0o1777)
        for source, dest in files:
            _add(tar, source, dest)
        for alias in ("python", "python3"):
            link = tarfile.TarInfo(f"usr/local/bin/{alias}")
            link.type, link.linkname = tarfile.SYMTYPE, interpreter
            tar.addfile(link)
        users = f"root:x:0:0::/root:/nonexistent\nlero:x:{SANDBOX_UID}:{SANDBOX_UID}::/tmp:/nonexistent\n"
        _add_text(tar, "/etc/passwd", users)
        _add_text(tar, "/etc/group", f"root:x:0:\nlero:x:{SANDBOX_UID}:\n")
    return len(files)
