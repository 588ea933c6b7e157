"""Indexing, gather and scatter."""

import torch
from row import SampleRule, aten, arg, from_opinfo, hand_written, kwarg, tensor
from torch.testing._internal.opinfo.core import SampleInput

PARITY_DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)


def _ints(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


def _mask(shape):
    return tensor(shape, torch.bool)


def _index(dtype):
    # Advanced indexing of a (5, 6, 7) tensor: negative indices, None between index tensors,
    # broadcasting, boolean masks, int32 indices, and separated index tensors (whose result dims
    # torch moves to the front).
    cases = [
        [_ints([0, 4, -1, 2])],
        [None, _ints([[1, -2, 0], [5, 3, -6]])],
        [_ints([0, -1, 3]), _ints([2, 5, -6])],
        [None, _ints([[0], [-1], [3]]), _ints([1, 6, -7, 2])],
        [_ints([[1, -5]]), None, _ints([[0], [6], [3]])],
        [_mask((5,))],
        [None, _mask((6, 7))],
        [_mask((5,)), None, _ints([3])],
        [_ints([0, -1], torch.int32), _ints([2, 3], torch.int32), _ints([1, -7], torch.int32)],
        [None, None, _ints([[0, -1], [3, 3]])],
    ]
    for indices in cases:
        yield SampleInput(tensor((5, 6, 7), dtype), args=(indices,))


def _index_put(dtype):
    # accumulate=False writes each position once: torch leaves the winner among repeated
    # positions unspecified.
    cases = [
        ([_ints([0, -1, 2])], (3, 6, 7), False),
        ([None, _ints([1, -2]), _ints([0, 6])], (2,), False),
        ([_ints([[1], [3]]), None, _ints([0, -1])], (2, 2, 6), False),
        ([_mask((5, 6, 7))], (), False),
        ([_mask((5,))], (7,), False),
        ([None, _mask((6, 7))], (1,), False),
        ([_ints([2, 0], torch.int32)], (1, 6, 7), False),
        ([_ints([0, 0, -1, 4])], (4, 6, 7), True),
        ([None, _ints([1, 1]), _ints([2, 2])], (1,), True),
        ([_mask((5,))], (7,), True),
    ]
    for indices, values_shape, accumulate in cases:
        yield SampleInput(tensor((5, 6, 7), dtype), args=(indices, tensor(values_shape, dtype), accumulate))


def _scalar_value(sample) -> bool:
    return not isinstance(sample.args[2], torch.Tensor)


def _accumulates(sample) -> bool:
    return bool(arg(sample, 2, "accumulate", False))


# ONNX's Scatter* ops combine the updates of repeated indices (`reduction`) only from opset 16
# (add, mul) and 18 (max, min); below that the converters fail clearly.
def _reduction_before(opset: int, reduction: str, matches=lambda sample: True, dtypes=None) -> SampleRule:
    reason = f"ONNX Scatter* ops have reduction '{reduction}' only from opset {opset}; fastonnx fails clearly below"
    return SampleRule(reason, matches, dtypes=dtypes, opsets=range(opset))


NUMBERS = (torch.float32, torch.float16, torch.int64)
ADD_BEFORE_16 = _reduction_before(16, "add")
MUL_BEFORE_16 = _reduction_before(16, "mul")
ACCUMULATE_BEFORE_16 = _reduction_before(16, "add", _accumulates)
REDUCE_BEFORE_16 = _reduction_before(16, "add/mul", kwarg("reduce"))
# bool max and min are a sum and a product (any, all), which opset 16 has.
MAX_BEFORE_18 = (
    _reduction_before(18, "max", dtypes=NUMBERS),
    _reduction_before(16, "add (bool max)", dtypes=(torch.bool,)),
)
MIN_BEFORE_18 = (
    _reduction_before(18, "min", dtypes=NUMBERS),
    _reduction_before(16, "mul (bool min)", dtypes=(torch.bool,)),
)

# onnxruntime has no float16 add reduction, so fastonnx sums float16 updates in float and rounds
# once, where torch rounds after every addition: they differ by the rounding of the partial sums.
HALF_SUM_TOLERANCE = {torch.float16: (2e-3, 1.6e-2)}


ROWS = (
    hand_written(
        "index.Tensor",
        fn=lambda x, indices: aten.index.Tensor(x, indices),
        samples=_index,
        dtypes=PARITY_DTYPES,
        max_samples=10,
    ),
    hand_written(
        "index.Tensor",
        id="index.Tensor.complex",
        fn=lambda x, indices: aten.index.Tensor(x, indices),
        samples=_index,
        dtypes=(torch.complex64,),
        max_samples=10,
    ),
    hand_written(
        "index_put",
        id="index_put.hand",
        fn=lambda x, indices, values, accumulate: aten.index_put.default(x, indices, values, accumulate),
        samples=_index_put,
        dtypes=PARITY_DTYPES,
        max_samples=10,
        tolerance=HALF_SUM_TOLERANCE,
        xfails=(ACCUMULATE_BEFORE_16,),
    ),
    from_opinfo("index_put", "index_put", xfails=(ACCUMULATE_BEFORE_16,)),
    from_opinfo("index_select", "index_select"),
    from_opinfo("gather", "gather"),
    from_opinfo("take", "take"),
    from_opinfo("take_along_dim", "take_along_dim"),
    # Complex tensors, gathered on their real and imaginary parts apart (the specs' `complex: parts`).
    *(
        from_opinfo(name, name, id=f"{name}.complex", dtypes=(torch.complex64,))
        for name in ("index_select", "gather", "take", "take_along_dim")
    ),
    from_opinfo("masked_select", "masked_select"),
    from_opinfo("masked_scatter", "masked_scatter"),
    from_opinfo(
        "nonzero",
        "nonzero",
        sample_filter=SampleRule("as_tuple=True is aten.nonzero_numpy, row nonzero_numpy", kwarg("as_tuple")),
    ),
    from_opinfo(
        "nonzero",
        "nonzero_numpy",
        id="nonzero_numpy",
        sample_filter=SampleRule("as_tuple=False is aten.nonzero, row nonzero", lambda s: not kwarg("as_tuple")(s)),
    ),
    from_opinfo(
        "scatter",
        "scatter.src",
        "scatter.reduce",
        sample_filter=SampleRule("a scalar value is scatter.value(_reduce), row scatter.value", _scalar_value),
        xfails=(REDUCE_BEFORE_16,),
    ),
    from_opinfo(
        "scatter",
        "scatter.value",
        "scatter.value_reduce",
        id="scatter.value",
        sample_filter=SampleRule("a tensor src is scatter.src/scatter.reduce, row scatter", lambda s: not _scalar_value(s)),
        xfails=(REDUCE_BEFORE_16,),
    ),
    from_opinfo("scatter_add", "scatter_add", xfails=(ADD_BEFORE_16,)),
    from_opinfo("scatter_reduce", "scatter_reduce.two", variant="sum", xfails=(ADD_BEFORE_16,)),
    from_opinfo("scatter_reduce", "scatter_reduce.two", variant="prod", xfails=(MUL_BEFORE_16,)),
    from_opinfo("scatter_reduce", "scatter_reduce.two", variant="mean", xfails=(ADD_BEFORE_16,)),
    from_opinfo("scatter_reduce", "scatter_reduce.two", variant="amax", xfails=MAX_BEFORE_18),
    from_opinfo("scatter_reduce", "scatter_reduce.two", variant="amin", xfails=MIN_BEFORE_18),
    from_opinfo("index_add", "index_add", xfails=(ADD_BEFORE_16,)),
    from_opinfo("index_copy", "index_copy"),
    from_opinfo("index_fill", "index_fill.int_Scalar", "index_fill.int_Tensor"),
    from_opinfo("slice_scatter", "slice_scatter"),
    from_opinfo("select_scatter", "select_scatter"),
    from_opinfo("diagonal_scatter", "diagonal_scatter"),
)
