"""`python -m lero.sandbox build [--mode offline|dockerfile]` and `python -m lero.sandbox check`.

`lero sandbox build | check` calls the same `build_image` / `check` functions.
"""

from __future__ import annotations

import argparse
import sys

from lero.sandbox.check import check
from lero.sandbox.image import BUILD_MODES, build_image
from lero.sandbox.types import SandboxUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sandbox", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="build the sandbox image locally")
    build.add_argument(
        "--mode",
        choices=BUILD_MODES,
        default="offline",
        help="offline (default: from this Python, no registry needed; `auto` is its old name) "
        "or dockerfile (needs a registry)",
    )
    commands.add_parser("check", help="report daemon, image and a smoke run")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build_image(args.mode)
            return 0
        report = check()
    except SandboxUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for name, (ok, detail) in report.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    return 0 if all(ok for ok, _ in report.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
