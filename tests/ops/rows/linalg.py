"""Matrix products, einsum and distances."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

# Sums of products of OpInfo's values (up to 9 in magnitude) reach the hundreds, where one float16
# ulp is 0.0625; torch and onnxruntime add the batch products in different orders (torch rounds
# after each batch's addmm_), so results differ by an ulp, which near a cancellation is a large
# relative error. float32 differs in the last bits the same way.
BATCH_SUM_TOLERANCE = {torch.float16: (1e-3, 0.13), torch.float32: (1.3e-6, 1e-4)}
# baddbmm in float16: torch computes alpha * (b1 @ b2) + beta * self in float32 and rounds once;
# ONNX rounds the product, each scaling and the sum to float16.
SCALED_PRODUCT_TOLERANCE = {torch.float16: (1e-3, 2e-3)}

# torch (LAPACK's LU) and onnxruntime (Eigen's) factorize in different orders.
DETERMINANT_TOLERANCE = {torch.float32: (1e-4, 1e-4)}

DISTANCE_NORMS = (0.0, 1.0, 2.0, 3.5, 0.5, float("inf"))


def _cdist_forward(dtype):
    shapes = [((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)), ((2, 1, 3, 2), (4, 5, 2))]
    for p in DISTANCE_NORMS:
        for a, b in shapes:
            yield SampleInput(tensor(a, dtype), args=(tensor(b, dtype), p, None))


def _pdist_forward(dtype):
    for p in DISTANCE_NORMS:
        for shape in [(5, 3), (1, 4), (6, 1)]:
            yield SampleInput(tensor(shape, dtype), args=(p,))


def _einsum_bool(dtype):
    """einsum of bools (OpInfo's has none): an And where nothing is summed or a diagonal is taken,
    an int64 count where the result sums (torch has no bool contraction: bmm refuses bool)."""
    for equation, shapes in [
        ("...ii->...i", [(3, 5, 5)]),
        ("ij,j->ij", [(3, 4), (4,)]),
        ("ij->ji", [(3, 4)]),
        ("...ij->", [(2, 3, 4)]),
    ]:
        yield SampleInput(equation, args=([tensor(shape, dtype) for shape in shapes],))


def _square(dtype):
    for shape in [(3, 3), (2, 4, 4), (2, 3, 5, 5), (1, 1)]:
        yield SampleInput(tensor(shape, dtype))


ROWS = (
    from_opinfo("nn.functional.linear", "linear"),
    from_opinfo("addmm", "addmm"),
    from_opinfo("mm", "mm"),
    from_opinfo("bmm", "bmm"),
    from_opinfo("matmul", "matmul"),
    from_opinfo("baddbmm", "baddbmm", tolerance=SCALED_PRODUCT_TOLERANCE),
    from_opinfo("addbmm", "addbmm", tolerance=BATCH_SUM_TOLERANCE),
    from_opinfo("dot", "dot"),
    from_opinfo("vdot", "vdot"),
    from_opinfo("outer", "outer"),
    from_opinfo("einsum", "einsum"),
    hand_written("einsum", id="einsum.bool", fn=torch.einsum, samples=_einsum_bool, dtypes=(torch.bool,)),
    from_opinfo("cdist", "cdist"),
    from_opinfo("linalg.det", "linalg_det", tolerance=DETERMINANT_TOLERANCE),
    hand_written("det", fn=torch.det, samples=_square, tolerance=DETERMINANT_TOLERANCE),
    from_opinfo("logdet", "logdet", tolerance=DETERMINANT_TOLERANCE),
    from_opinfo("linalg.slogdet", "linalg_slogdet", tolerance=DETERMINANT_TOLERANCE),
    hand_written("slogdet", fn=torch.slogdet, samples=_square, tolerance=DETERMINANT_TOLERANCE),
    from_opinfo("nn.functional.pdist", "pdist"),
    hand_written(
        "_cdist_forward", fn=lambda x, *args: aten._cdist_forward(x, *args), samples=_cdist_forward, max_samples=18
    ),
    hand_written(
        "_pdist_forward", fn=lambda x, *args: aten._pdist_forward(x, *args), samples=_pdist_forward, max_samples=18
    ),
)
