"""Sorting and top-k. ONNX TopK puts the lower index first among equal elements, which is
torch's stable order; torch's unstable sort and topk order equal elements their own way."""

import torch
from row import SampleRule, arg, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

PARITY_DTYPES = (torch.float32, torch.float16, torch.int64, torch.bool)


def _stable_indices(x: torch.Tensor, dim: int, descending: bool) -> torch.Tensor:
    return torch.sort(x, dim=dim, descending=descending, stable=True).indices


def _not_stable_order(sample) -> bool:
    """Samples whose equal elements torch's unstable sort puts out of their stable order."""
    if sample.kwargs.get("stable"):
        return False
    dim, descending = arg(sample, 0, "dim", -1), arg(sample, 1, "descending", False)
    unstable = torch.sort(sample.input, dim=dim, descending=descending).indices
    return not torch.equal(unstable, _stable_indices(sample.input, dim, descending))


def _topk_not_stable_order(sample) -> bool:
    """Samples where torch.topk's indices are not the first k of a stable sort."""
    if sample.input.dim() == 0:
        return False
    k, dim, largest = arg(sample, 0, "k"), arg(sample, 1, "dim", -1), arg(sample, 2, "largest", True)
    got = torch.topk(sample.input, *sample.args, **sample.kwargs).indices
    return not torch.equal(got, _stable_indices(sample.input, dim, largest).narrow(dim, 0, k))


def _with_ties(dtype):
    # Few distinct values, so most elements have equals.
    for shape, dim in [((12,), -1), ((3, 10), 1), ((6, 4), 0)]:
        for descending in (False, True):
            yield SampleInput(tensor(shape, dtype, low=0, high=3), kwargs={"dim": dim, "descending": descending})


def _distinct(dtype):
    # Distinct values (a permutation), so the k selected and their order are defined.
    for shape, k, dim in [((10,), 3, -1), ((4, 9), 9, 1), ((6, 5), 0, 0), ((2, 7, 3), 2, -2)]:
        values = torch.randperm(torch.Size(shape).numel()).reshape(shape).to(dtype)
        for largest in (False, True):
            yield SampleInput(values, args=(k,), kwargs={"dim": dim, "largest": largest})
    values = torch.randperm(40).reshape(5, 8).to(dtype)
    yield SampleInput(values, args=(4,), kwargs={"dim": 1, "largest": False, "sorted": False})
    yield SampleInput(values, args=(4,), kwargs={"dim": 1, "largest": True, "sorted": False})


def _unsorted_order_differs(sample) -> bool:
    """topk(sorted=False) samples whose torch result is not in sorted order."""
    if sample.kwargs.get("sorted", True):
        return False
    unsorted = torch.topk(sample.input, *sample.args, **sample.kwargs).indices
    return not torch.equal(unsorted, torch.topk(sample.input, *sample.args, **{**sample.kwargs, "sorted": True}).indices)


UNSTABLE_TIES = "torch's unstable sort orders equal elements its own way (undefined); TopK keeps them in index order"

def _bucketize_special(dtype):
    """NaN values go after every boundary (torch's search compares them false); values equal to
    a boundary go before it, or after it with `right`."""
    values = torch.tensor([float("nan"), 1.0, 2.5, -float("inf"), float("inf"), 3.0, 0.0], dtype=dtype)
    for right in (False, True):
        yield SampleInput(values, args=(torch.tensor([1.0, 2.0, 3.0], dtype=dtype), right))
    yield SampleInput(tensor((3, 4), dtype), args=(torch.tensor([], dtype=dtype), False))


def _with_nans(dtype):
    """torch counts each NaN as a value of its own, after the numbers."""
    nan = float("nan")
    for values in [[5.0, 1.0, nan, 1.0, nan], [[nan, 2.0], [nan, 2.0]], [nan, nan], [3.0, -1.0, 3.0]]:
        yield SampleInput(torch.tensor(values, dtype=dtype))


ROWS = (
    from_opinfo("sort", "sort", "sort.stable", xfails=(SampleRule(UNSTABLE_TIES, _not_stable_order),)),
    from_opinfo("argsort", "argsort", "argsort.stable", xfails=(SampleRule(UNSTABLE_TIES, _not_stable_order),)),
    from_opinfo(
        "topk",
        "topk",
        xfails=(
            SampleRule(
                "torch.topk orders equal elements its own way (undefined); TopK keeps them in index order",
                _topk_not_stable_order,
            ),
        ),
    ),
    # Stable sorts where most elements tie: the order of equal elements is defined.
    hand_written(
        "sort.stable",
        id="sort.stable.ties",
        fn=lambda x, **kw: torch.sort(x, stable=True, **kw),
        samples=_with_ties,
        dtypes=PARITY_DTYPES,
    ),
    hand_written(
        "argsort.stable",
        id="argsort.stable.ties",
        fn=lambda x, **kw: torch.argsort(x, stable=True, **kw),
        samples=_with_ties,
        dtypes=PARITY_DTYPES,
    ),
    # The OpInfo has no largest=False and no sorted=False samples.
    hand_written(
        "topk",
        id="topk.distinct",
        fn=torch.topk,
        samples=_distinct,
        dtypes=(torch.float32, torch.float16, torch.int64),
        max_samples=10,
        xfails=(
            SampleRule(
                "torch.topk(sorted=False) leaves the order unspecified and returns these unsorted; fastonnx sorts",
                _unsorted_order_differs,
            ),
        ),
    ),
    from_opinfo("bucketize", "bucketize.Tensor"),
    from_opinfo(
        "unique",
        "_unique2",
        "unique_dim",
        xfails=(
            SampleRule(
                "unique along a dim of floating values is refused: torch takes slices holding NaN as distinct",
                lambda s: s.kwargs.get("dim") is not None and s.input.is_floating_point(),
            ),
        ),
    ),
    hand_written("_unique2", id="unique.nan", fn=lambda x: torch.unique(x, return_inverse=True, return_counts=True),
                 samples=_with_nans),
    hand_written("bucketize.Tensor", id="bucketize.special", fn=lambda x, b, right: torch.bucketize(x, b, right=right),
                 samples=_bucketize_special),
)
