"""No leaks: repeated exports do not grow the process, and the native core keeps no reference
to a torch tensor once the export's result is gone (while the result lives, its native model
borrows the weights instead of copying them)."""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import sys
import weakref

import pytest
import torch

import fastonnx

log = logging.getLogger(__name__)


def _trim_heap() -> None:
    """Hand the allocator's free pages back to the OS (glibc's malloc_trim), so that RSS counts
    memory in use. Without it, heap fragmentation left by earlier tests in the same process (the
    parity table's thousands of exports and onnxruntime sessions) made RSS drift by up to 1 MB per
    export while the bytes in use (mallinfo2) stayed flat: noise, not a leak. A leak is memory in
    use, which no trim returns."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def _rss_mb() -> float:
    """RSS after a collection and a heap trim: the memory the process holds in use."""
    gc.collect()
    _trim_heap()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _mlp(layers: int) -> torch.nn.Module:
    return torch.nn.Sequential(*[m for _ in range(layers) for m in (torch.nn.Linear(64, 64), torch.nn.ReLU())]).eval()


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS is read from /proc (Linux)")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer keeps freed memory in quarantine: RSS tells nothing under it")
def test_200_exports_do_not_grow_the_process(tmp_path):
    """A native model leaked per export would add ~14 MB here (measured by keeping them)."""
    # fastonnx's own export, without the suite's per-export onnx.checker run (conftest), whose
    # allocations are onnx's, not fastonnx's.
    from fastonnx.pipeline.export import export

    ep = torch.export.export(_mlp(30), (torch.randn(2, 64),))
    path = str(tmp_path / "m.onnx")
    for _ in range(20):  # warm-up: caches, allocator pools
        export(ep, (), path).to_bytes()
    before = _rss_mb()
    for _ in range(200):
        export(ep, (), path).to_bytes()
    growth = _rss_mb() - before
    log.info("RSS over 200 exports: %.1f MB -> %.1f MB (%+.2f MB)", before, before + growth, growth)
    assert growth < 5, f"RSS grew by {growth:.1f} MB over 200 exports"


def _refcounts(tensors) -> list[int]:
    gc.collect()
    return [sys.getrefcount(t) for t in tensors]


def test_no_reference_to_a_tensor_after_the_result_is_gone(tmp_path):
    model = _mlp(3)
    params = list(model.parameters())
    before = _refcounts(params)
    result = fastonnx.export(model, (torch.randn(2, 64),), str(tmp_path / "m.onnx"))
    result.to_bytes()
    del result
    assert _refcounts(params) == before
    probe = weakref.ref(params[0])
    del model, params
    gc.collect()
    assert probe() is None


def test_no_reference_to_a_tensor_after_a_failed_export():
    class HalfConvertible(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x).to(torch.complex64) / 2  # converts the Linear, then fails

    model = HalfConvertible()
    params = list(model.parameters())
    before = _refcounts(params)
    with pytest.raises(fastonnx.ConversionError):
        fastonnx.export(model, (torch.randn(2, 4),))
    assert _refcounts(params) == before
