"""Fake kernels, for the length of a trace, for ops whose fake result torch computes at a cost
out of all proportion to the result.

``aten.scaled_dot_product_attention`` stays one node in torch.export's program, but its fake result
(the output's shape and strides) is computed by running the op's CompositeImplicitAutograd kernel:
the math decomposition, about 100 fake dispatches per call (matmuls, the mask, softmax, views),
each costing milliseconds of sympy when the shapes are symbolic. In a 16-layer LLaMA traced with
a dynamic batch and past (``export-hf --genai``) that was 2.6 s of an 8.4 s trace; in an 8B one,
32 layers of it. The kernel below gives the same output, makes the same shape checks in the order
the decomposition makes them (q·kᵀ, the mask's broadcast, then ·v), and so leaves the same guards
and the same program (``tests/test_fake_kernels.py`` compares both).

It is a Python kernel of the op (``OpOverload.py_impl``), which torch consults only under the
Python dispatcher, as torch.export traces; installed while fastonnx traces and removed after. A
call it does not cover (real tensors, static shapes, autograd recording, a dtype or rank the real
op would refuse, a backend other than math enabled) runs the op's own kernel, as without it.
"""

from __future__ import annotations

import contextlib
import threading

import torch
from torch._subclasses.fake_tensor import FakeTensor

_SDPA = torch.ops.aten.scaled_dot_product_attention.default
_KEY = torch._C.DispatchKey.CompositeImplicitAutograd
_lock = threading.Lock()
_depth = 0


def _decomposed(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    # The op's own C++ kernel for the key (OpOverload.decompose would call this Python one again).
    return _SDPA._op_dk(_KEY, query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


def _plain(query, key, value, attn_mask, is_causal: bool, enable_gqa: bool) -> bool:
    """Whether the call is one the kernel below covers: everything else runs the decomposition,
    which also raises the real op's errors."""
    tensors = [t for t in (query, key, value, attn_mask) if t is not None]
    # The op computes on the CPU with its flash kernel where it can (its fake result has other
    # strides); with the math one where only that is enabled, as transformers' exporter traces,
    # and always on the meta device (a model built there, as export-hf builds it).
    device = query.device.type
    if not torch.backends.cuda.math_sdp_enabled() or not (
        device == "meta" or (device == "cpu" and not torch.backends.cuda.flash_sdp_enabled())
    ):
        return False
    if not all(isinstance(t, FakeTensor) and t.layout == torch.strided for t in tensors):
        return False
    if not any(t._has_symbolic_sizes_strides for t in tensors):
        return False  # static shapes: the decomposition is quick, and nothing is guarded
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False  # the output must then carry autograd's history
    if not query.dtype.is_floating_point or key.dtype != query.dtype or value.dtype != query.dtype:
        return False
    if len({query.device, key.device, value.device}) != 1 or not query.dim() == key.dim() == value.dim() >= 3:
        return False
    if attn_mask is not None and (
        is_causal or attn_mask.device != query.device or attn_mask.dtype not in (torch.bool, query.dtype)
    ):
        return False
    if enable_gqa:
        heads = (query.shape[-3], key.shape[-3], value.shape[-3])
        if not all(isinstance(h, int) for h in heads) or heads[1] != heads[2] or heads[0] % heads[1]:
            return False
    return True


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    if _plain(query, key, value, attn_mask, is_causal, enable_gqa):
        out = _quick(query, key, value, attn_mask, enable_gqa)
        if out is not None:
            return out
    return _decomposed(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)


def _quick(query, key, value, attn_mask, enable_gqa: bool) -> torch.Tensor | None:
    """The fake result of a call _plain covers, or None where the real op raises (its kernel
    then says why)."""
    q_batch, k_batch, v_batch = tuple(query.shape[:-2]), tuple(key.shape[:-2]), tuple(value.shape[:-2])
    length, width, keys = query.shape[-2], query.shape[-1], key.shape[-2]
    # The decomposition's checks, in its order; each comparison of symbolic sizes guards (and
    # unifies the sizes) as its matmuls and broadcasts do.
    # `not ... ==`: the decomposition asks whether sizes are equal (Eq), and so must this.
    if not key.shape[-1] == width:  # noqa: SIM201 (q @ k.transpose(-2, -1))
        return None
    if enable_gqa:  # k and v repeated to the query's heads
        k_batch = (*k_batch[:-1], q_batch[-1])
        v_batch = (*v_batch[:-1], q_batch[-1])
    batch = torch.broadcast_shapes(q_batch, k_batch)
    if attn_mask is not None:  # scores + mask
        torch.broadcast_shapes(tuple(attn_mask.shape), (*batch, length, keys))
    if not value.shape[-2] == keys:  # noqa: SIM201 (softmax(scores) @ v)
        return None
    batch = torch.broadcast_shapes(batch, v_batch)
    # matmul's result: contiguous, in the query's dtype and on its device.
    return query.new_empty((*batch, length, value.shape[-1]))


@contextlib.contextmanager
def quick_fake_kernels():
    """The kernels above, installed for the block (nested and concurrent blocks share one
    installation). An op that already has a Python kernel of its own is left alone."""
    global _depth
    with _lock:
        installed = _depth > 0 or _KEY not in _SDPA.py_kernels
        if installed:
            if _depth == 0:
                _SDPA.py_impl(_KEY)(_sdpa)
            _depth += 1
    try:
        yield
    finally:
        if installed:
            with _lock:
                _depth -= 1
                if _depth == 0:
                    del _SDPA.py_kernels[_KEY]
                    _SDPA._dispatch_cache.clear()
