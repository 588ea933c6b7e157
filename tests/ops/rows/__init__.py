"""The rows of the per-op parity table: every module of this package defines ``ROWS``, one
module per op family (as codegen/mappings has one YAML file per family)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil

from row import Row


def _collect() -> tuple[Row, ...]:
    rows: list[Row] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        rows.extend(dataclasses.replace(r, family=info.name) for r in module.ROWS)
    return tuple(rows)


ALL_ROWS: tuple[Row, ...] = _collect()
