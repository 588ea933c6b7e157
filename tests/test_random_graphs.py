"""Every model written is valid: random small graphs (random op sequences from the mapped set,
random shapes, dtypes and opsets) export to models that pass the full checker and strict shape
inference, load and run in onnxruntime, and compute what PyTorch computes.

The ops are a list of simple elementwise, reduction, shape and matmul steps, kept to those
fastonnx.supported_ops() has today, so the test grows with the op table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import torch
from hypothesis import given, reject
from hypothesis import strategies as st

import fastonnx
from fuzz import fuzz_settings
from support import run_ort

FLOAT, INT, BOOL = "float", "int", "bool"


def _kind(t: torch.Tensor) -> str:
    return BOOL if t.dtype == torch.bool else FLOAT if t.is_floating_point() else INT


@dataclass(frozen=True)
class Step:
    name: str
    overloads: tuple[str, ...]  # what the traced graph calls: the step is used when all are mapped
    kinds: frozenset[str]  # element kinds of the first operand it accepts
    fn: Callable  # fn(module, x) or fn(module, x, y) for a binary step
    binary: bool = False
    min_rank: int = 0


def _unary(name, overloads, kinds, fn, min_rank=0):
    return Step(name, tuple(overloads), frozenset(kinds), lambda m, x: fn(x), min_rank=min_rank)


def _binary(name, overloads, kinds, fn):
    return Step(name, tuple(overloads), frozenset(kinds), lambda m, x, y: fn(x, y), binary=True)


NUM = (FLOAT, INT)
STEPS = [
    _unary("relu", ["relu"], [FLOAT], torch.relu),
    _unary("sigmoid", ["sigmoid"], [FLOAT], torch.sigmoid),
    _unary("tanh", ["tanh"], [FLOAT], torch.tanh),
    _unary("neg", ["neg"], NUM, torch.neg),
    _unary("abs", ["abs"], NUM, torch.abs),
    _unary("exp", ["exp"], [FLOAT], torch.exp),
    _unary("floor", ["floor"], [FLOAT], torch.floor),
    _unary("hardtanh", ["hardtanh"], [FLOAT], torch.nn.functional.hardtanh),
    _unary("leaky_relu", ["leaky_relu"], [FLOAT], torch.nn.functional.leaky_relu),
    _unary("scale", ["mul.Tensor"], NUM, lambda x: x * 3),
    _unary("shift", ["add.Tensor"], NUM, lambda x: x + 2),
    _unary("halve", ["div.Tensor"], NUM, lambda x: x / 2),
    _unary("clone", ["clone"], (FLOAT, INT, BOOL), torch.clone),
    _unary("softmax", ["softmax.int"], [FLOAT], lambda x: x.softmax(-1), min_rank=1),
    _unary("log_softmax", ["log_softmax.int"], [FLOAT], lambda x: x.log_softmax(0), min_rank=1),
    _unary("sum_last", ["sum.dim_IntList"], NUM, lambda x: x.sum(-1), min_rank=1),
    _unary("sum_keep", ["sum.dim_IntList"], NUM, lambda x: x.sum(0, keepdim=True), min_rank=1),
    _unary("mean_last", ["mean.dim"], [FLOAT], lambda x: x.mean(-1), min_rank=1),
    _unary("sum_all", ["sum"], NUM, torch.sum),
    _unary("transpose", ["transpose.int"], (FLOAT, INT, BOOL), lambda x: x.transpose(0, -1), min_rank=2),
    _unary("permute", ["permute"], (FLOAT, INT, BOOL), lambda x: x.permute(*reversed(range(x.dim()))), min_rank=2),
    _unary("flatten", ["view"], (FLOAT, INT, BOOL), lambda x: x.reshape(-1)),
    _unary("unsqueeze", ["unsqueeze"], (FLOAT, INT, BOOL), lambda x: x.unsqueeze(0)),
    _unary("to_float", ["_to_copy"], (INT, BOOL), lambda x: x.float()),
    _unary("to_int", ["_to_copy"], [FLOAT], lambda x: x.long()),
    _unary("positive", ["gt.Scalar"], NUM, lambda x: x > 0),
    _unary("self_matmul", ["matmul"], [FLOAT], lambda x: x @ x.transpose(-1, -2), min_rank=2),
    Step("linear", ("linear",), frozenset([FLOAT]), lambda m, x: m.linear(x), min_rank=1),
    _binary("add", ["add.Tensor"], NUM, torch.add),
    _binary("sub", ["sub.Tensor"], NUM, torch.sub),
    _binary("mul", ["mul.Tensor"], NUM, torch.mul),
    _binary("div", ["div.Tensor"], [FLOAT], torch.div),
    _binary("maximum", ["maximum"], NUM, torch.maximum),
    _binary("minimum", ["minimum"], NUM, torch.minimum),
    _binary("where", ["where.self", "gt.Scalar"], NUM, lambda x, y: torch.where(x > 0, x, y)),
    _binary("cat", ["cat"], (FLOAT, INT, BOOL), lambda x, y: torch.cat([x, y])),
]
SUPPORTED = set(fastonnx.supported_ops())
USABLE = [s for s in STEPS if set(s.overloads) <= SUPPORTED]


class Program(torch.nn.Module):
    """Replays a recipe: each step reads earlier values by index and appends its result."""

    def __init__(self, recipe: list[tuple[Step, tuple[int, ...]]], outputs: list[int], features: int):
        super().__init__()
        self.recipe = recipe
        self.outputs = outputs
        self.linear = torch.nn.Linear(features, features)

    def forward(self, *inputs):
        values = list(inputs)
        for step, operands in self.recipe:
            values.append(step.fn(self, *(values[i] for i in operands)))
        return tuple(values[i] for i in self.outputs)


def _tensor(kind: str, shape: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == FLOAT:
        return torch.randn(shape, generator=g)
    if kind == INT:
        return torch.randint(-5, 6, shape, generator=g)
    return torch.randint(0, 2, shape, generator=g).bool()


@st.composite
def programs(draw):
    features = draw(st.integers(1, 4))
    n_inputs = draw(st.integers(1, 2))
    rank = draw(st.integers(0, 3))
    shape = [features] * rank if draw(st.booleans()) else draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    inputs = [_tensor(draw(st.sampled_from([FLOAT, FLOAT, INT, BOOL])), shape, draw(st.integers(0, 2**16)))
              for _ in range(n_inputs)]
    module = Program([], [], features)
    values = list(inputs)
    for _ in range(draw(st.integers(1, 6))):
        step = draw(st.sampled_from(USABLE))
        x = draw(st.integers(0, len(values) - 1))
        if _kind(values[x]) not in step.kinds or values[x].dim() < step.min_rank:
            continue
        operands = (x,)
        if step.binary:
            same = [i for i, v in enumerate(values) if v.shape == values[x].shape and _kind(v) == _kind(values[x])]
            operands = (x, draw(st.sampled_from(same)))
        if step.name == "linear" and values[x].shape[-1] != features:
            continue
        try:
            with torch.no_grad():
                values.append(step.fn(module, *(values[i] for i in operands)))
        except RuntimeError:
            continue  # torch itself refuses this combination
        module.recipe.append((step, operands))
    if not module.recipe:
        reject()
    module.outputs = sorted({len(values) - 1, draw(st.integers(n_inputs, len(values) - 1))})
    return module.eval(), tuple(inputs), draw(st.integers(fastonnx._C.MIN_OPSET, fastonnx._C.MAX_OPSET))


@fuzz_settings(40)
@given(case=programs())
def test_random_graph_is_valid_and_runs(case):
    module, inputs, opset = case
    try:
        ep = torch.export.export(module, inputs)
    except Exception:  # noqa: BLE001 - a recipe torch.export cannot trace is not ours to test
        reject()
    traced = {str(n.target._schema.name).removeprefix("aten::") + (f".{n.target._schema.overload_name}" if n.target._schema.overload_name else "")
              for n in ep.graph.nodes if n.op == "call_function" and hasattr(n.target, "_schema")}
    if not traced <= SUPPORTED:
        reject()  # the recipe traced to an op mapped later in the day
    try:
        proto = fastonnx.export(ep, opset_version=opset).model_proto
    except fastonnx.ConversionError as e:
        # ONNX lacking a dtype at this opset is a documented, clear refusal; anything else fails.
        if "has no" not in str(e) or "version" not in str(e):
            raise
        reject()
    onnx.checker.check_model(proto, full_check=True)
    onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True, data_prop=True)
    with torch.no_grad():
        expected = module(*inputs)
    got = run_ort(proto, list(inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(torch.from_numpy(np.asarray(g)), e, rtol=1e-4, atol=1e-5, equal_nan=True)
