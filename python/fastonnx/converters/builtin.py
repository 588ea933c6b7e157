"""The converters fastonnx ships in Python, registered in one place when fastonnx is imported.
Each is registered by the op's qualified name, so the library that defines the op (torchvision,
transformers) need not be importable; ``fastonnx.supported_ops()`` lists them."""

from __future__ import annotations

from collections.abc import Callable

from . import quantized, symbolic, torchvision, transformers
from .registry import register_converter

CONVERTERS: dict[str, Callable] = {
    **quantized.CONVERTERS,
    **symbolic.CONVERTERS,
    **torchvision.CONVERTERS,
    **transformers.CONVERTERS,
}


def register() -> None:
    for name, fn in CONVERTERS.items():
        register_converter(name, fn)
