"""Recurrent layers traced with a dynamic sequence length.

PyTorch's decompositions of ``aten.lstm``, ``aten.gru``, ``aten.rnn_tanh`` and ``aten.rnn_relu``
loop over the time steps in Python, so tracing them fixes the sequence length. torch ships
while_loop-based ones for LSTM and GRU (``torch.export._patches``, which torch.onnx registers for
dynamic shapes too); the Elman RNN's here follow them (torch has none). While they are registered,
torch.export keeps each layer whole as one FX node (fastonnx converts it to ONNX LSTM, GRU or RNN)
and computes its output shape through the loop, keeping the sequence length symbolic.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F


def _elman_layer(inp, hidden, params, has_biases, reverse=False, *, nonlinearity):
    """One layer of an Elman RNN over ``inp`` (seq, batch, features) as a while_loop, as
    torch's ``one_layer_while_loop_gru`` does for GRU."""
    from torch._higher_order_ops.while_loop import while_loop
    from torch.export._patches import _clone_tensors_that_alias

    ih_weight, hh_weight = params[0], params[1]
    ih_bias, hh_bias = (params[2], params[3]) if has_biases else (None, None)
    steps = F.linear(inp, ih_weight, ih_bias)
    steps = steps.flip(0) if reverse else steps
    hh_weight, hh_bias = _clone_tensors_that_alias((hh_weight, hh_bias))
    state = hidden.unsqueeze(0)
    out = torch.empty(steps.size(0), *state.shape[1:], dtype=state.dtype, device=state.device)

    def cond_fn(i, out, state):
        return i < steps.size(0)

    def body_fn(index, out, state):
        i = index.item()
        torch._check_is_size(i, max=steps.size(0) - 1)
        state = nonlinearity(F.linear(state, hh_weight, hh_bias) + steps[i])
        out = out.clone()
        out[i] = state.squeeze(0)
        return index + 1, out, state

    _, out, final = while_loop(cond_fn, body_fn, [torch.tensor(0, dtype=torch.int64), out, state])
    return (out.flip(0) if reverse else out), final.squeeze(0)


def _elman(nonlinearity):
    """``aten.rnn_tanh.input`` / ``aten.rnn_relu.input`` with the layers as while_loops."""
    from torch._decomp.decompositions import _rnn_helper, gather_params

    layer = functools.partial(_elman_layer, nonlinearity=nonlinearity)

    def impl(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        out, final = _rnn_helper(
            input,
            hx.unbind(0),
            gather_params(params, has_biases, False),
            has_biases,
            num_layers,
            dropout,
            train,
            bidirectional,
            batch_first,
            layer,
        )
        return out, torch.stack(final, 0)

    return impl


@contextlib.contextmanager
def rnns_as_loops():
    """While active, LSTM, GRU and Elman RNN layers trace with a symbolic sequence length.
    Without torch's registrations (another torch), layers trace as they do by default."""
    try:
        from torch.export import _patches
    except ImportError:
        yield
        return
    ops = (
        torch.ops.aten.lstm.input,
        torch.ops.aten.gru.input,
        torch.ops.aten.rnn_tanh.input,
        torch.ops.aten.rnn_relu.input,
    )
    # torch's registration sets the kernels without clearing the ops' dispatch caches: an op
    # dispatched before (an export without dynamic shapes) would keep its unrolling kernel, and
    # one dispatched inside would keep the loop after. Cleared on the way in and out.
    _clear_dispatch_caches(ops)
    try:
        with (
            _patches.register_lstm_while_loop_decomposition(),
            _patches.register_gru_while_loop_decomposition(),
            _patches._register_rnn_while_loop_decomposition(ops[2], _elman(torch.tanh)),
            _patches._register_rnn_while_loop_decomposition(ops[3], _elman(torch.relu)),
        ):
            yield
    finally:
        _clear_dispatch_caches(ops)


def _clear_dispatch_caches(ops) -> None:
    for op in ops:
        cache = getattr(op, "_dispatch_cache", None)
        if cache is not None:
            cache.clear()
