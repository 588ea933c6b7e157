"""Padding: constant (negative pads crop), reflect, replicate and circular."""

import torch
from row import aten, from_opinfo, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput


def _padded(spatial_dims: int, allow_negative: bool):
    """Batched and unbatched inputs, pads per side up to size - 1 (reflection's limit) and, for
    replication, negative pads that crop."""

    def samples(dtype):
        spatial = (5, 4, 6)[:spatial_dims]
        pads = [(1, 2, 0, 3, 2, 1), (0, 0, 3, 1, 1, 0), (2, 2, 2, 2, 2, 2)]
        if allow_negative:
            pads += [(-1, 3, 2, -2, -1, 1), (-3, 1, 0, -1, 2, -2)]
        for batch in [(2, 3), (3,)]:
            for pad in pads:
                yield SampleInput(tensor(batch + spatial, dtype), args=(list(pad[: 2 * spatial_dims]),))

    return samples


# torch's reflection and replication kernels have no bool version.
_DTYPES = (torch.float32, torch.float16, torch.int64)


def _direct(op: str, spatial_dims: int, allow_negative: bool):
    """A row calling aten.<op> itself (F.pad reaches these only through aten.pad)."""
    target = getattr(aten, op)
    samples = _padded(spatial_dims, allow_negative)
    return hand_written(op, fn=lambda x, pad: target(x, pad), samples=samples, dtypes=_DTYPES)


ROWS = (
    from_opinfo("constant_pad_nd", "constant_pad_nd"),
    from_opinfo("nn.functional.pad", "pad", variant="constant"),
    from_opinfo("nn.functional.pad", "pad", variant="reflect"),
    from_opinfo("nn.functional.pad", "pad", variant="replicate"),
    from_opinfo("nn.functional.pad", "pad", variant="replicate_negative"),
    from_opinfo("nn.functional.pad", "pad", variant="circular"),
    *(_direct(f"reflection_pad{n}d", n, allow_negative=False) for n in (1, 2, 3)),
    *(_direct(f"replication_pad{n}d", n, allow_negative=True) for n in (1, 2, 3)),
)
