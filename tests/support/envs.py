"""Custom envs the way a researcher brings them: a module in the working directory, a
package installed with pip into a virtualenv of its own, a dependency not in the base image.

`write_wheel` writes a real wheel (pip installs it without any build backend);
`write_project` a setuptools project, which `pip_install(..., editable=True)` installs in
place with setuptools' own editable finder hook;
`layered_venv` makes a virtualenv that sees this interpreter's packages (lero included)
through a `.pth` file, so installing into it never touches the test's own environment.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

from lero.sandbox.image import site_roots

PROOF_ENV = Path(__file__).with_name("proof_env.py")


def proof_env_source(*dependencies: str, expect: dict | None = None) -> str:
    """The proof env's code; with DEPENDENCIES, it imports those modules and records their
    MARKs (`dependencies`, in order); with EXPECT, a proof that differs from it makes the
    factory raise (proof_env.EXPECT)."""
    source = PROOF_ENV.read_text()
    if expect is not None:
        source = source.replace("EXPECT: dict | None = None", f"EXPECT: dict | None = {expect!r}")
    if not dependencies:
        return source
    imports = "".join(f"import {name}\n" for name in dependencies)
    source = source.replace("import numpy as np\n", f"import numpy as np\n{imports}")
    marks = ", ".join(f"{name}.MARK" for name in dependencies)
    return source.replace("_record({})", f'_record({{"dependencies": [{marks}]}})')


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(directory: Path, name: str, files: dict[str, str], requires: tuple[str, ...] = (),
                entry_points: str = "") -> Path:
    """A pure-Python wheel of distribution NAME (version 1.0) holding FILES {path: text}."""
    info = f"{name.replace('-', '_')}-1.0.dist-info"
    metadata = "".join([f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
                        *(f"Requires-Dist: {r}\n" for r in requires)])
    contents = {**files, f"{info}/METADATA": metadata,
                f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: lero-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    if entry_points:
        contents[f"{info}/entry_points.txt"] = entry_points
    wheel = directory / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in contents.items():
            archive.writestr(path, text)
            records.append(_record_line(path, text.encode()))
        archive.writestr(f"{info}/RECORD", "\n".join([*records, f"{info}/RECORD,,"]) + "\n")
    return wheel


def layered_venv(path: Path) -> Path:
    """A fresh virtualenv at PATH on top of this interpreter's packages; returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    own_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    lines = "".join(f"import site; site.addsitedir({str(root)!r})\n" for root in site_roots())
    Path(own_site, "_lero_parent.pth").write_text(lines)
    return python


def write_project(directory: Path, name: str, files: dict[str, str]) -> Path:
    """A setuptools project of distribution NAME (flat layout: `pip install -e` gives it a
    finder hook) holding FILES {path: text}; returns its directory."""
    project = directory / name
    packages = json.dumps(sorted({path.split("/")[0] for path in files if "/" in path}))
    project.mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "1.0"\n\n[tool.setuptools]\npackages = {packages}\n'
    )
    for path, text in files.items():
        (project / path).parent.mkdir(parents=True, exist_ok=True)
        (project / path).write_text(text)
    return project


def pip_install(python: Path, target: Path, editable: bool = False) -> None:
    """Install a wheel, or a project (`editable`: `pip install -e`), offline with the setuptools at hand."""
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", *(["-e"] if editable else []), str(target)], check=True)  # fmt: skip
