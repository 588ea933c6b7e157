"""Views, copies, type conversions, and the ops that take parts of a tensor."""

import torch
from row import PARITY_DTYPES, SampleRule, aten, from_opinfo, hand_written, shapes_only, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _unsafe_view(dtype):
    for shape, size in [((3, 4), [12]), ((2, 3, 4), [6, 4]), ((2, 3, 4), [-1, 3]), ((), [1])]:
        yield SampleInput(tensor(shape, dtype), args=(size,))


def _to_copy(dtype):
    for target in [torch.float64, torch.float16, torch.int64, torch.bool, None]:
        yield SampleInput(tensor((3, 4), dtype), kwargs={"dtype": target})


def _to_copy_complex(dtype):
    """To and from complex dtypes: a real tensor gains a zero imaginary part, a complex one keeps its
    real part (bool: whether either part is nonzero)."""
    targets = [torch.complex64, torch.complex128] if not dtype.is_complex else [
        torch.complex128, torch.complex64, torch.float32, torch.float64, torch.int64, torch.bool]
    for target in targets:
        for shape in [(3, 4), ()]:
            yield SampleInput(tensor(shape, dtype), kwargs={"dtype": target})


def _views(dtype):
    for shape in [(), (0,), (3, 4), (2, 0, 3)]:
        yield SampleInput(tensor(shape, dtype))


def _to_dtype_layout(dtype):
    for target in [torch.float64, torch.int64, torch.bool, None]:
        yield SampleInput(tensor((3, 4), dtype), kwargs={"dtype": target, "layout": torch.strided})


def _set_source(dtype):
    """self takes source's storage: its shape, its values."""
    for shape, source_shape in [((2, 3), (4, 6)), ((3,), ()), ((2, 2), (0, 5))]:
        yield SampleInput(tensor(shape, dtype), args=(tensor(source_shape, dtype),))


def _copy(dtype):
    """src broadcast to self's shape and converted to self's dtype."""
    for shape, src_shape, src_dtype in [
        ((3, 4), (3, 4), dtype),
        ((2, 3, 4), (4,), dtype),
        ((2, 3), (), torch.float64),
        ((2, 3), (1, 3), torch.int64),
        ((0, 3), (3,), dtype),
        ((), (), torch.bool),
    ]:
        yield SampleInput(tensor(shape, dtype), args=(tensor(src_shape, src_dtype),))


def _slices(dtype):
    """Steps above 1, negative bounds, bounds beyond the size (torch clamps) and empty results."""
    x = tensor((5, 6), dtype)
    for dim, start, end, step in [
        (0, 1, 4, 2),
        (1, -4, -1, 1),
        (1, -100, 100, 3),
        (0, 3, 100, 1),
        (1, 4, 2, 1),
        (-1, None, None, 4),
        (0, 7, None, 1),
        (1, None, -2, 2),
    ]:
        yield SampleInput(x.clone(), args=(dim, start, end, step))
    yield SampleInput(tensor((0, 3), dtype), args=(0, 0, 2, 1))


def _narrow(dtype):
    """Negative starts, one of them running to the end."""
    for dim, start, length in [(0, -2, 2), (1, -3, 1), (-1, 0, 0)]:
        yield SampleInput(tensor((4, 5), dtype), args=(dim, start, length))


def _movedim_int(dtype):
    for shape, source, destination in [((2, 3, 4), 0, 2), ((2, 3, 4), -1, 0), ((2, 3, 4, 5), 1, -1), ((), 0, -1)]:
        yield SampleInput(tensor(shape, dtype), args=(source, destination))


def _repeat_interleave_counts(dtype):
    for counts, output_size in [([1, 2, 3], 6), ([0, 2, 0, 1], 3), ([4], 4), ([], 0)]:
        yield SampleInput(torch.tensor(counts, dtype=torch.int64), kwargs={"output_size": output_size})
    yield SampleInput(torch.tensor([2, 0, 1], dtype=torch.int32), kwargs={"output_size": 3})


def _resize(grow: bool):
    def samples(dtype):
        cases = [((2, 3, 4), (5, 5)), ((6,), (3, 3)), ((), (2, 2)), ((0,), (2, 3))] if grow else [
            ((2, 3, 4), (4, 5)), ((6,), (2, 2)), ((3, 4), (2, 2, 1)), ((3, 4), (0,))
        ]
        for shape, size in cases:
            yield SampleInput(tensor(shape, dtype), args=(size,))

    return samples


def _transposed(dtype):
    yield SampleInput(tensor((3, 4), dtype))
    yield SampleInput(tensor((2, 3, 4), dtype))
    yield SampleInput(tensor((2, 3, 4, 5), dtype), kwargs={"memory_format": torch.channels_last})


def _windows(dtype):
    # (dimension, size, step); no size 1, which torch.export specializes
    for shape, args in [((4, 7), (1, 3, 2)), ((5, 6, 3), (0, 2, 1)), ((3, 8, 2), (-2, 4, 4))]:
        yield SampleInput(tensor(shape, dtype), args=args)


def _copy_complex(dtype):
    """Into a complex tensor: a complex src, a real one (a zero imaginary part); into a real one: the
    real part of a complex src."""
    for shape, src_shape, src_dtype in [
        ((3, 4), (3, 4), dtype), ((2, 3, 4), (4,), dtype), ((2, 3), (1, 3), torch.float32)
    ]:
        yield SampleInput(tensor(shape, dtype), args=(tensor(src_shape, src_dtype),))
    yield SampleInput(tensor((2, 3), torch.float32), args=(tensor((2, 3), dtype),))


def _cat_complex(dtype):
    """A complex tensor joined with real ones (torch promotes them: a zero imaginary part)."""
    yield SampleInput([tensor((2, 3), dtype), tensor((1, 3), torch.float32), tensor((2, 3), torch.int64)])
    yield SampleInput([tensor((2, 3), torch.float32), tensor((2, 2), dtype)], kwargs={"dim": 1})


# Complex tensors, (real, imaginary) pairs in the ONNX graph. These ops move elements without
# computing on them: a complex node converts on the real and imaginary parts apart (the specs'
# `complex: parts`), permute and transpose move the pairs in one Transpose.
COMPLEX = (torch.complex64,)
_COMPLEX_ROWS = tuple(
    from_opinfo(
        name, *overloads, variant=variant, id=f"{name}.{variant + '.' if variant else ''}complex", dtypes=COMPLEX
    )
    for name, overloads, variant in [
        ("t", ("t",), ""),
        ("permute", ("permute",), ""),
        ("transpose", ("transpose.int",), ""),
        ("view", ("view",), ""),
        ("reshape", ("reshape",), ""),
        ("flatten", ("flatten.using_ints",), ""),
        ("cat", ("cat",), ""),
        ("expand", ("expand",), ""),
        ("repeat", ("repeat",), ""),
        ("tile", ("tile",), ""),
        ("squeeze", ("squeeze", "squeeze.dim"), ""),
        ("squeeze", ("squeeze.dims",), "multiple"),
        ("unsqueeze", ("unsqueeze",), ""),
        ("unflatten", ("unflatten.int",), ""),
        ("stack", ("stack",), ""),
        ("movedim", ("movedim.intlist",), ""),
        ("repeat_interleave", ("repeat_interleave.self_int", "repeat_interleave.self_Tensor"), ""),
        ("narrow", ("narrow",), ""),
        ("select", ("select.int",), ""),
        ("slice", ("slice.Tensor",), ""),
        ("split", ("split.Tensor",), ""),
        ("split_with_sizes", ("split_with_sizes",), ""),
        ("chunk", ("chunk",), ""),
        ("unbind", ("unbind.int",), ""),
        ("flip", ("flip",), ""),
        ("roll", ("roll",), ""),
        ("diagonal", ("diagonal",), ""),
        ("as_strided", ("as_strided",), ""),
        ("unfold", ("unfold",), ""),
    ]
) + (
    hand_written("copy", id="copy.complex", fn=lambda x, src: aten.copy.default(x, src), samples=_copy_complex,
                 dtypes=COMPLEX),
    hand_written("cat", id="cat.complex_and_real", fn=lambda xs, **kw: torch.cat(xs, **kw), samples=_cat_complex,
                 dtypes=COMPLEX),
    hand_written("unfold", id="unfold.dynamic.complex", fn=torch.Tensor.unfold, samples=_windows, dynamic=True,
                 dtypes=COMPLEX),
)

ROWS = (
    from_opinfo("t", "t"),
    from_opinfo("permute", "permute"),
    from_opinfo("transpose", "transpose.int"),
    from_opinfo("view", "view"),
    from_opinfo("reshape", "reshape"),
    from_opinfo("flatten", "flatten.using_ints"),
    from_opinfo("cat", "cat"),
    from_opinfo("clone", "clone"),
    # torch.export records Tensor.to(dtype) (and to(other_tensor)) as a metadata assert followed
    # by to.dtype, to(device, dtype) as to.device.
    from_opinfo("to", "to.dtype", "to.device", "_assert_tensor_metadata"),
    hand_written(
        "to.dtype_layout", fn=lambda x, **kw: aten.to.dtype_layout(x, **kw), samples=_to_dtype_layout,
        dtypes=PARITY_DTYPES,
    ),
    hand_written("_unsafe_view", fn=lambda x, size: aten._unsafe_view.default(x, size), samples=_unsafe_view),
    hand_written("_to_copy", fn=lambda x, **kw: aten._to_copy.default(x, **kw), samples=_to_copy),
    hand_written(
        "_to_copy", id="_to_copy.complex", fn=lambda x, **kw: aten._to_copy.default(x, **kw), samples=_to_copy_complex,
        dtypes=(torch.float32, torch.int64, torch.complex64),
    ),
    # OpInfo's contiguous samples are already contiguous, so torch.export records no op for them.
    hand_written("contiguous", fn=lambda x, **kw: x.transpose(0, -1).contiguous(**kw), samples=_transposed),
    hand_written("alias", fn=lambda x: aten.alias.default(x), samples=_views, dtypes=PARITY_DTYPES),
    hand_written("detach", fn=lambda x: x.detach(), samples=_views, dtypes=PARITY_DTYPES),
    hand_written(
        "lift_fresh_copy", fn=lambda x: aten.lift_fresh_copy.default(x), samples=_views, dtypes=PARITY_DTYPES
    ),
    hand_written("set_.source_Tensor", fn=lambda x, src: x.clone().set_(src), samples=_set_source, dtypes=PARITY_DTYPES),
    hand_written("copy", fn=lambda x, src: aten.copy.default(x, src), samples=_copy, dtypes=PARITY_DTYPES),
    from_opinfo("resize_", "resize_"),
    hand_written(
        "resize_", id="resize_.shrink", fn=lambda x, size: x.clone().resize_(size), samples=_resize(grow=False),
        dtypes=PARITY_DTYPES,
    ),
    # Growing leaves the new elements uninitialized in torch.
    hand_written(
        "resize_", id="resize_.grow", fn=lambda x, size: x.clone().resize_(size), samples=_resize(grow=True),
        compare=shapes_only,
        dtypes=PARITY_DTYPES,
    ),
    from_opinfo("expand", "expand"),
    from_opinfo("repeat", "repeat"),
    from_opinfo("tile", "tile"),
    from_opinfo("squeeze", "squeeze", "squeeze.dim"),
    from_opinfo("squeeze", "squeeze.dims", variant="multiple"),
    from_opinfo("unsqueeze", "unsqueeze"),
    from_opinfo("unflatten", "unflatten.int"),
    from_opinfo("stack", "stack"),
    from_opinfo("movedim", "movedim.intlist"),
    hand_written(
        "movedim.int", fn=lambda x, source, destination: x.movedim(source, destination), samples=_movedim_int,
        dtypes=PARITY_DTYPES,
    ),
    from_opinfo("repeat_interleave", "repeat_interleave.self_int", "repeat_interleave.self_Tensor"),
    hand_written(
        "repeat_interleave.Tensor",
        fn=lambda repeats, **kw: torch.repeat_interleave(repeats, **kw),
        samples=_repeat_interleave_counts,
    ),
    from_opinfo("narrow", "narrow"),
    hand_written(
        "narrow", id="narrow.negative_start", fn=lambda x, *args: x.narrow(*args), samples=_narrow, dtypes=PARITY_DTYPES
    ),
    from_opinfo("select", "select.int"),
    from_opinfo("slice", "slice.Tensor"),
    hand_written(
        "slice.Tensor", id="slice.bounds", fn=lambda x, *args: aten.slice.Tensor(x, *args), samples=_slices,
        dtypes=PARITY_DTYPES,
    ),
    from_opinfo("split", "split.Tensor"),
    from_opinfo("split", "split_with_sizes", variant="list_args"),
    from_opinfo("split_with_sizes", "split_with_sizes"),
    from_opinfo("chunk", "chunk"),
    from_opinfo("unbind", "unbind.int"),
    from_opinfo("flip", "flip"),
    from_opinfo("roll", "roll"),
    from_opinfo("diagonal", "diagonal"),
    from_opinfo("as_strided", "as_strided"),
    from_opinfo("unfold", "unfold", id="unfold.windows"),
    # The number of windows computed from a dynamic size.
    hand_written("unfold", id="unfold.dynamic", fn=torch.Tensor.unfold, samples=_windows, dynamic=True),
    from_opinfo("as_strided", "as_strided", variant="partial_views"),
    from_opinfo("triu", "triu"),
    from_opinfo("tril", "tril"),
    *_COMPLEX_ROWS,
)
