"""Size queries, arithmetic on symbolic sizes, and `.item()`. These rows trace with dynamic
dimensions: with static ones torch.export records the sizes as plain ints."""

import torch
from row import aten, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _matrices(dtype):
    # No size 1: torch.export specializes it, which conflicts with a dynamic dimension.
    for shape in [(3, 4), (2, 5), (6, 2)]:
        yield SampleInput(tensor(shape, dtype))


def _query_instead_of_number(query, *args):
    """For ``x + <number>``: makes the program compute the number with ``query(x, *args)``.
    torch.export never records these queries (on contiguous tensors their value is a size it
    already knows, or a constant), so the row puts one where eager computed it."""

    def edit(ep: torch.export.ExportedProgram) -> None:
        add = next(n for n in ep.graph.nodes if n.target is aten.add.Tensor)
        with ep.graph.inserting_before(add):
            computed = ep.graph.call_function(query, (add.args[0], *args))
        add.args = (add.args[0], computed)

    return edit


ROWS = (
    hand_written(
        "sym_size.int",
        fn=lambda x: x.reshape(x.shape[0] * x.shape[1], -1),
        samples=_matrices,
        dtypes=(torch.float32, torch.int64, torch.bool),
        dynamic=True,
    ),
    hand_written("sym_numel", fn=lambda x: x.reshape(x.numel()), samples=_matrices, dynamic=True),
    hand_written(
        "sym_stride.int",
        fn=lambda x: x + x.stride(0),
        samples=_matrices,
        edit=_query_instead_of_number(aten.sym_stride.int, 0),
    ),
    hand_written(
        "sym_stride.int",
        id="sym_stride.int.last",
        fn=lambda x: x + x.stride(1),
        samples=_matrices,
        edit=_query_instead_of_number(aten.sym_stride.int, 1),
    ),
    hand_written(
        "sym_storage_offset",
        fn=lambda x: x + x.storage_offset(),
        samples=_matrices,
        edit=_query_instead_of_number(aten.sym_storage_offset.default),
    ),
    hand_written(
        "sym_is_contiguous",
        fn=lambda x: x * int(aten.sym_is_contiguous(x)),
        samples=_matrices,
        dynamic=True,
    ),
    hand_written(
        "_local_scalar_dense",
        fn=lambda x: x * aten._local_scalar_dense(x.sum()),
        samples=_matrices,
        dtypes=(torch.float32, torch.int64),
    ),
)


def _item_in_range(x):
    n = x.sum().item()
    torch._check(n >= 0)  # recorded as _assert_scalar on the unbacked size
    return x * n


def _async_assert(x):
    aten._assert_async.msg(x.abs().sum() >= 0, "sum of magnitudes is negative")
    return x + 1


def _small_ints(dtype):
    for shape in [(3, 4), (2, 5)]:
        yield SampleInput(tensor(shape, dtype, low=0, high=5))


# Checks torch.export inserts are dropped; the rows show the graph around them still converts.
ROWS += (
    hand_written("_assert_scalar", fn=_item_in_range, samples=_small_ints, dtypes=(torch.int64,)),
    hand_written("_assert_async.msg", fn=_async_assert, samples=_matrices),
)
