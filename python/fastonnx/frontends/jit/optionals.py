"""Values a scripted model may leave None (``Optional[Tensor]``: ``y = None`` in one branch of an
``if`` and a tensor in the other), as ONNX optionals, as the TorchScript exporter writes them. Such
a value is a ``fastonnx::optional`` node (a tensor held) or a ``fastonnx::optional_none`` one (of
the type a value would have), marked by ``OPTIONAL`` in its FX node's meta, as is each ``if``
result made of them; the native converters write Optional, and an If returning one returns an
optional. The graph returns them; an op that reads one, a test of it against None, or a loop that
carries one is an error (fastonnx does not write OptionalHasElement or OptionalGetElement)."""

from __future__ import annotations

import torch

from ...errors import ConversionError
from .packed_rnn import _declared_schema
from .translator import Translator

# Set on an FX node whose value is an ONNX optional.
OPTIONAL = "fastonnx_optional"


@torch.library.custom_op("fastonnx::optional", mutates_args=(), schema=_declared_schema("optional"))
def optional(x: torch.Tensor) -> torch.Tensor:
    """``x``, held by an optional (its value: eager never runs it, the FX graph records it)."""
    return x.clone()


@optional.register_fake
def _(x):
    return x.new_empty(x.shape)


@torch.library.custom_op("fastonnx::optional_none", mutates_args=(), schema=_declared_schema("optional_none"))
def optional_none(dtype: torch.dtype, size: list[int]) -> torch.Tensor:
    """An optional holding no value of element type ``dtype``: the tensor stands for the type
    and the shape (``size``) a value would have."""
    return torch.empty(size, dtype=dtype)


@optional_none.register_fake
def _(dtype, size):
    return torch.empty(size, dtype=dtype)


def is_optional(value) -> bool:
    return isinstance(value, torch.fx.Node) and bool(value.meta.get(OPTIONAL))


def held(t: Translator, value: torch.fx.Node) -> torch.fx.Node:
    """``value`` as an optional (itself when it is one)."""
    if is_optional(value):
        return value
    node = t.emit(torch.ops.fastonnx.optional.default, (value,))
    node.meta[OPTIONAL] = True
    return node


def none_of(t: Translator, dtype: torch.dtype, sizes: list) -> torch.fx.Node:
    node = t.emit(torch.ops.fastonnx.optional_none.default, (dtype, sizes))
    node.meta[OPTIONAL] = True
    return node


def refuse_optional(what: str, values) -> None:
    """A ConversionError when one of ``values`` is an optional: ``what`` reads it."""
    if any(is_optional(v) or isinstance(v, list | tuple) and any(is_optional(x) for x in v) for v in values):
        raise ConversionError(
            f"{what} reads a value the model may leave None (an ONNX optional), which fastonnx only returns"
        )
