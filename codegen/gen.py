"""Runs the generator: specs + schemas -> checked converters -> rendered C++ files."""

from __future__ import annotations

from pathlib import Path

from . import opsets
from .dest.converters import Converter
from .dest.files import FileManager
from .dest.onnx_types import op_arities, op_versions
from .dest.specs import compile_spec, derive_inplace, manual_bodies
from .load import NativeFunctions, load_specs

ROOT = Path(__file__).resolve().parent.parent
MAPPINGS = ROOT / "codegen" / "mappings"
TEMPLATES = ROOT / "templates"
GENERATED = ROOT / "cpp" / "generated"


def compile_all(nf: NativeFunctions, mapping_dir: Path = MAPPINGS) -> list[Converter]:
    converters: dict[str, Converter] = {}
    for spec in load_specs(mapping_dir):
        converters[spec.overload] = compile_spec(spec, nf, converters)
    for inplace, functional in nf.inplace_twins():
        if inplace not in converters and functional in converters:
            derived = derive_inplace(inplace, converters[functional], nf)
            if derived is not None:
                converters[inplace] = derived
    return list(converters.values())


def generate(
    nf: NativeFunctions, *, check: bool, mapping_dir: Path = MAPPINGS, out_dir: Path = GENERATED
) -> FileManager:
    converters = compile_all(nf, mapping_dir)
    fm = FileManager(TEMPLATES, out_dir, check, sources="codegen/mappings/*.yaml, native_functions.yaml and onnx.defs")
    fm.render("converters.h.j2", "converters.h", converters=converters, manual_bodies=manual_bodies(converters))
    # One file per mapping file, so that an edit to one recompiles only its family.
    for family in sorted({c.family for c in converters if c.generated}):
        generated = [c for c in converters if c.generated and c.family == family]
        fm.render("converters.cpp.j2", f"converters_{family}.cpp", family=family, converters=generated)
    fm.render("registry.cpp.j2", "registry.cpp", converters=converters)
    fm.render("onnx_types.cpp.j2", "onnx_types.cpp", versions=op_versions())
    fm.render("onnx_ops.h.j2", "onnx_ops.h", arities=op_arities())
    fm.render(
        "opsets.h.j2",
        "opsets.h",
        min_opset=opsets.MIN_OPSET,
        max_opset=opsets.MAX_OPSET,
        default_opset=opsets.DEFAULT_OPSET,
        ir_versions=opsets.ir_versions(),
    )
    return fm


def coverage(nf: NativeFunctions, mapping_dir: Path = MAPPINGS) -> tuple[list[str], list[str]]:
    """(mapped, missing) among the overloads tagged `core`."""
    mapped = {c.overload for c in compile_all(nf, mapping_dir)}
    core = nf.core()
    return [c for c in core if c in mapped], [c for c in core if c not in mapped]
