"""Runs the generator: specs + schemas -> checked converters -> rendered C++ files."""

from __future__ import annotations

from pathlib import Path

from . import opsets
from .api import fragments as F
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
    # A header and a source per mapping file: an edit to one family recompiles its source (its
    # converters and registry rows), the hand-written files that include its header, and the
    # registry, which only joins the families' rows.
    families = sorted({c.family for c in converters})
    home = _callee_families(converters)
    for family in families:
        rows = [c for c in converters if c.family == family]
        generated = [c for c in rows if c.generated]
        fm.render(
            "converters.h.j2",
            f"converters_{family}.h",
            family=family,
            converters=generated,
            manual_bodies=manual_bodies(rows),
        )
        fm.render(
            "converters.cpp.j2",
            f"converters_{family}.cpp",
            family=family,
            converters=generated,
            rows=rows,
            other_families=sorted({home[c.callee] for c in rows} - {family}),
        )
    fm.render("registry.cpp.j2", "registry.cpp", families=families)
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


def _callee_families(converters: list[Converter]) -> dict[str, str]:
    """The family whose header declares each function a registry row calls: a row of one family
    may call another's (`same_as:` an overload of another mapping file)."""
    home: dict[str, str] = {}
    for c in converters:
        if c.generated:
            home[c.callee] = c.family
        for r in c.rules:
            if r.manual:
                home.setdefault(F.manual_name(r.manual), c.family)
    return home


def coverage(nf: NativeFunctions, mapping_dir: Path = MAPPINGS) -> tuple[list[str], list[str]]:
    """(mapped, missing) among the overloads tagged `core`."""
    mapped = {c.overload for c in compile_all(nf, mapping_dir)}
    core = nf.core()
    return [c for c in core if c in mapped], [c for c in core if c not in mapped]
