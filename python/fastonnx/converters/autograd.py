"""``torch.autograd.Function`` subclasses with a static ``symbolic`` method: as torch.onnx
promises, their ``symbolic`` converts them, and their ``forward`` is not traced into the graph.

While tracing, ``Function.apply`` of such a class calls a ``torch.library`` op made for it
instead (one per class and kind of arguments), whose fake implementation runs ``forward`` on fake
tensors (for the output types and shapes) and whose Python converter is ``symbolic``. A Function
without ``symbolic`` is traced through as before.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
from collections.abc import Iterator

import torch

from .registry import register_positional

NAMESPACE = "fastonnx_autograd"
_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")
_LOCK = threading.Lock()
_CLASSES: list[type] = []  # of the ops made so far, for unique op names


class _Context:
    """What ``forward`` gets as ``ctx`` when it only computes outputs' types: saving for
    backward and marking outputs do nothing."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def mark_dirty(self, *tensors):
        pass

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


def _schema_type(value) -> str | None:
    """The schema type of one argument of ``apply``; None for one a schema cannot carry."""
    if isinstance(value, torch.Tensor):
        return "Tensor"
    if value is None:
        return "Tensor?"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, torch.SymInt)):
        return "SymInt"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return "int[]"
    return None


@functools.cache
def _op_for(cls: type, types: tuple[str, ...]):
    """The op that stands for ``cls.apply`` with arguments of these schema types. It returns a
    list of tensors; ``_shapes`` records whether ``forward`` returned one tensor or a tuple."""
    name = re.sub(r"\W", "_", f"{cls.__module__}_{cls.__qualname__}") + f"_{len(_CLASSES)}"
    _CLASSES.append(cls)
    arguments = ", ".join(f"{t} a{i}" for i, t in enumerate(types))
    _LIBRARY.define(f"{name}({arguments}) -> Tensor[]")
    tuple_output: dict[str, bool] = {}

    # A Function with its own setup_context has a forward without ctx (torch's newer style).
    takes_ctx = getattr(cls, "setup_context", None) is torch.autograd.Function.setup_context

    def run_forward(*args):
        out = cls.forward(_Context(), *args) if takes_ctx else cls.forward(*args)
        tuple_output["tuple"] = isinstance(out, (tuple, list))
        return [o.clone() for o in out] if tuple_output["tuple"] else [out.clone()]

    _LIBRARY.impl(name, run_forward, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{NAMESPACE}::{name}", run_forward, lib=_LIBRARY)
    symbolic = cls.symbolic  # type: ignore[attr-defined]
    register_positional(f"{NAMESPACE}::{name}", symbolic, None)
    return getattr(torch.ops.fastonnx_autograd, name).default, tuple_output


def _has_symbolic(cls: type) -> bool:
    return callable(getattr(cls, "symbolic", None))


@contextlib.contextmanager
def functions_as_ops() -> Iterator[None]:
    """While tracing: Functions with ``symbolic`` become calls of their op."""
    function = torch.autograd.Function
    original = function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        types = tuple(_schema_type(a) for a in args)
        if kwargs or not _has_symbolic(cls) or None in types:
            # Bound through the descriptor: a classmethod up to torch 2.13, a C classmethod_descriptor
            # (no __func__) from 2.14.
            return original.__get__(None, cls)(*args, **kwargs)
        op, tuple_output = _op_for(cls, types)
        out = op(*args)
        return tuple(out) if tuple_output["tuple"] else out[0]

    with _LOCK:
        function.apply = classmethod(apply)  # type: ignore[method-assign,assignment]
        try:
            yield
        finally:
            function.apply = original  # type: ignore[method-assign]
