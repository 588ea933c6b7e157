"""Converters for the ``torch.library`` ops transformers' models call, registered as Python
converters by name (transformers need not be imported, or even installed), and the hint for
a model that returns its cache, and the experts implementation a mixture-of-experts model is
traced with.

``transformers::grouped_mm_fallback(input [S, K], weight [E, K, N], offs [E])`` is the grouped
matrix product of mixture-of-experts layers: the rows of ``input`` are sorted by expert, rows
``offs[e-1]:offs[e]`` are multiplied by ``weight[e]``, rows past ``offs[-1]`` are zeros. Its
Python implementation loops over ``offs.tolist()``, which cannot be traced with a dynamic token
count, so it gets a converter: one MatMul per expert on its slice of rows (the number of experts
is static), which onnxruntime runs 10 to 50 times faster than gathering each row's expert
weights into an [S, K, N] tensor for one batched MatMul (benchmarks/grouped_mm.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..errors import TraceError
from .registry import GraphContext, Value

_INT64_MAX = 2**63 - 1


def _size0(g: GraphContext, x: Value) -> Value:
    return g.op("Slice", g.op("Shape", x), g.constant([0]), g.constant([1]))


def _experts(weight: Value) -> int:
    if weight.shape is None or not isinstance(weight.shape[0], int):
        raise ValueError("the number of experts (weight.shape[0]) must be static")
    return weight.shape[0]


def grouped_mm(g: GraphContext, input: Value, weight: Value, offs: Value) -> Value:
    experts, out_features = _experts(weight), weight.shape[2]  # type: ignore[index]
    ends = g.op("Cast", offs, to_i=7)  # int64
    starts = g.op("Concat", g.constant([0]), g.op("Slice", ends, g.constant([0]), g.constant([-1])), axis_i=0)
    parts = []
    for e in range(experts):
        rows = g.op(
            "Slice",
            input,
            g.op("Slice", starts, g.constant([e]), g.constant([e + 1])),
            g.op("Slice", ends, g.constant([e]), g.constant([e + 1])),
            g.constant([0]),
        )
        expert = g.op("Gather", weight, g.constant(e), axis_i=0)
        parts.append(g.op("MatMul", rows, expert))
    # Rows no expert took (past offs[-1]: expert-parallel sentinels) are zeros, as in the kernel.
    rest = g.op(
        "Slice",
        input,
        g.op("Slice", ends, g.constant([-1]), g.constant([_INT64_MAX])),
        g.constant([_INT64_MAX]),
        g.constant([0]),
    )
    rest_shape = g.op("Concat", _size0(g, rest), g.constant([out_features]), axis_i=0)
    zeros = g.op("Expand", g.constant(0.0, dtype=input.dtype), rest_shape)
    return g.op("Concat", *parts, zeros, axis_i=0)


@contextlib.contextmanager
def cache_hint() -> Iterator[None]:
    """A trace that fails because a transformers model returns its KV cache (use_cache=True, the
    default; torch.export has no pytree for the cache) fails with one line saying what to do."""
    try:
        yield
    except TraceError as e:
        if not returns_cache(e):
            raise
        raise TraceError(
            "the model returns its KV cache (transformers' use_cache=True, the default): pass "
            "kwargs={'use_cache': False}, or export for generation with "
            "fastonnx.integrations.transformers.FastOnnxExporter().export_for_generation"
        ) from e


@contextlib.contextmanager
def traceable_experts(model: object) -> Iterator[None]:
    """transformers' mixture-of-experts layers traced with their grouped matrix product.

    The "eager" experts implementation (the default of models tuned for an accumulation order,
    such as openai_privacy_filter) loops in Python over the experts the data routes tokens to, a
    count no tracer follows: torch.export stops at a data-dependent guard, and torch.jit.trace
    would keep the example's experts only. "grouped_mm", transformers' implementation of the same
    function on the same weights, traces (its op converts: ``grouped_mm`` above). Each model set
    to "eager" is traced with it, and set back afterwards."""
    changed = []
    for module in model.modules() if hasattr(model, "modules") else ():
        config = getattr(module, "config", None)
        if getattr(config, "_experts_implementation", None) != "eager" or not hasattr(
            module, "set_experts_implementation"
        ):
            continue
        if not module._can_set_experts_implementation():  # its experts do not dispatch on the setting
            continue
        before = module.get_experts_implementation()
        try:
            module.set_experts_implementation("grouped_mm")
        except (ValueError, ImportError):  # a torch without the grouped product: the model as it is
            continue
        changed.append((module, before))
    try:
        yield
    finally:
        for module, before in reversed(changed):
            module.set_experts_implementation(before)


def returns_cache(error: TraceError) -> bool:
    """Whether torch.export failed on a transformers KV cache among the outputs."""
    return "transformers.cache_utils" in str(error)


CONVERTERS: dict[str, Callable] = {"transformers::grouped_mm_fallback": grouped_mm}
