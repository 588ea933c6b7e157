"""python -m codegen [--check] [--coverage] [--native-functions PATH] [--mappings DIR]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .gen import GENERATED, MAPPINGS, ROOT, coverage, generate
from .load import NativeFunctions, default_native_functions
from .model import SpecError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m codegen",
        description="Generate the C++ converters of fastonnx from the ATen schemas and the YAML mapping specs.",
    )
    p.add_argument("--check", action="store_true", help="write nothing; fail if cpp/generated/ is stale")
    p.add_argument("--coverage", action="store_true", help="print mapped/total for the `core` tag and what is missing")
    p.add_argument(
        "--native-functions",
        type=Path,
        default=None,
        help="native_functions.yaml to read (default: the one packaged with the installed torch)",
    )
    p.add_argument(
        "--mappings", type=Path, default=MAPPINGS, help="the directory of mapping specs (default: %(default)s)"
    )
    args = p.parse_args(argv)
    nf = NativeFunctions.load(args.native_functions or default_native_functions())
    # Every entry point reports a bad spec as `file:line: message`, never as a traceback.
    try:
        if args.coverage:
            mapped, missing = coverage(nf, args.mappings)
            total = len(mapped) + len(missing)
            print(f"core ATen overloads mapped: {len(mapped)}/{total}")
            for name in missing:
                print(f"  missing: {name}")
            return 0
        fm = generate(nf, check=args.check, mapping_dir=args.mappings)
    except SpecError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    rel = lambda path: path.relative_to(ROOT)  # noqa: E731
    stale = fm.stale + ([] if not args.check else fm.leftovers())
    if args.check:
        if stale:
            print("stale generated files (run `python -m codegen`):", file=sys.stderr)
            for path in stale:
                print(f"  {rel(path)}", file=sys.stderr)
            return 1
        print(f"{rel(GENERATED)} is up to date")
        return 0
    for path in fm.leftovers():
        path.unlink()
        print(f"removed {rel(path)}")
    for path in fm.written:
        print(f"wrote {rel(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
