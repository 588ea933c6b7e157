"""Recurrent layers traced with a dynamic sequence length.

PyTorch's decompositions of ``aten.lstm``, ``aten.gru``, ``aten.rnn_tanh`` and ``aten.rnn_relu``
loop over the time steps in Python, so tracing them fixes the sequence length. torch ships
while_loop-based ones for LSTM and GRU (``torch.export._patches``, which torch.onnx registers for
dynamic shapes too); the ones here follow them, for the Elman RNN too (torch has none), and write
each step's output with ``select_scatter``: torch's ``out[i] = ...`` makes dynamo, which traces the
loop's body, specialize a batch traced at size 1. While they are registered, torch.export keeps
each layer whole as one FX node (fastonnx converts it to ONNX LSTM, GRU or RNN) and computes its
output shape through the loop, keeping the sequence length symbolic.
"""

from __future__ import annotations

import contextlib
import functools

import torch
import torch.nn.functional as F

from ...core.version import torch_release


def _layer(inp, states: list, ih_weight, ih_bias, step, reverse: bool):
    """One layer over ``inp`` (seq, batch, features) as a while_loop, as torch's
    ``one_layer_while_loop_lstm`` does: ``step(x_t, *states)`` gives the new states (each
    (1, batch, hidden), the first one the output). The outputs and the final states."""
    from torch._higher_order_ops.while_loop import while_loop

    steps = F.linear(inp, ih_weight, ih_bias)
    steps = steps.flip(0) if reverse else steps
    states = [state.unsqueeze(0) for state in states]
    first = states[0]
    out = torch.empty(steps.size(0), *first.shape[1:], dtype=first.dtype, device=first.device)

    def cond_fn(i, out, *states):
        return i < steps.size(0)

    def body_fn(index, out, *states):
        i = index.item()
        torch._check_is_size(i, max=steps.size(0) - 1)
        states = step(steps.select(0, i), *states)
        # (select_scatter: torch's `out[i] = ...` makes dynamo specialize a batch of one)
        return index + 1, torch.select_scatter(out, states[0].squeeze(0), 0, i), *states

    _, out, *finals = while_loop(cond_fn, body_fn, [torch.tensor(0, dtype=torch.int64), out, *states])
    return (out.flip(0) if reverse else out), [final.squeeze(0) for final in finals]


def _weights(params, has_biases: bool):
    """A layer's (ih_weight, ih_bias, hh_weight, hh_bias, hr_weight), the recurrent ones cloned
    where they alias (while_loop refuses aliased inputs)."""
    ih_bias, hh_bias = (params[2], params[3]) if has_biases else (None, None)
    hr_weight = params[4] if len(params) == 5 else params[2] if len(params) == 3 else None
    hh_weight, hh_bias, hr_weight = _unaliased((params[1], hh_bias, hr_weight))
    return params[0], ih_bias, hh_weight, hh_bias, hr_weight


def _unaliased(tensors: tuple) -> tuple:
    """``tensors`` with each one that overlaps an earlier one's memory cloned (a flattened RNN's
    weights share one storage), as torch 2.13's ``torch.export._patches`` does (2.11 and 2.12's
    have no such helper)."""
    kept: list[torch.Tensor] = []
    out = []
    for tensor in tensors:
        if tensor is not None and any(torch._C._overlaps(tensor, seen) for seen in kept):
            tensor = tensor.clone()
        out.append(tensor)
        if tensor is not None:
            kept.append(tensor)
    return tuple(out)


def _lstm_layer(inp, hidden, params, has_biases, reverse=False):
    from torch._decomp.decompositions import lstm_cell

    ih_weight, ih_bias, hh_weight, hh_bias, hr_weight = _weights(params, has_biases)

    def step(x, h, c):
        return lstm_cell(x, h, c, hh_weight, hh_bias, hr_weight, chunk_dim=2)

    out, (h, c) = _layer(inp, list(hidden), ih_weight, ih_bias, step, reverse)
    return out, (h, c)


def _gru_layer(inp, hidden, params, has_biases, reverse=False):
    from torch._decomp.decompositions import gru_cell

    ih_weight, ih_bias, hh_weight, hh_bias, _ = _weights(params, has_biases)

    def step(x, h):
        return (gru_cell(x, h, None, None, hh_weight, hh_bias),)

    out, (h,) = _layer(inp, [hidden], ih_weight, ih_bias, step, reverse)
    return out, h


def _elman_layer(inp, hidden, params, has_biases, reverse=False, *, nonlinearity):
    ih_weight, ih_bias, hh_weight, hh_bias, _ = _weights(params, has_biases)

    def step(x, h):
        return (nonlinearity(F.linear(h, hh_weight, hh_bias) + x),)

    out, (h,) = _layer(inp, [hidden], ih_weight, ih_bias, step, reverse)
    return out, h


def _lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """``aten.lstm.input`` with the layers as while_loops (torch's ``lstm_while_loop_impl``)."""
    from torch._decomp.decompositions import _rnn_helper, gather_params

    params = gather_params(params, has_biases, hx[0].size(2) != hx[1].size(2))
    hidden = list(zip(hx[0], hx[1]))
    out, finals = _rnn_helper(
        input, hidden, params, has_biases, num_layers, dropout, train, bidirectional, batch_first, _lstm_layer
    )
    h, c = zip(*finals)
    return out, torch.stack(h, 0), torch.stack(c, 0)


def _single_state(layer):
    """``aten.gru.input`` / ``aten.rnn_tanh.input`` / ``aten.rnn_relu.input`` with the layers as
    while_loops."""
    from torch._decomp.decompositions import _rnn_helper, gather_params

    def impl(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        out, finals = _rnn_helper(
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
        return out, torch.stack(finals, 0)

    return impl


@contextlib.contextmanager
def lstm_final_states_fixed():
    """torch 2.11 and 2.12's decomposition of one LSTM layer (which gives ``aten.lstm`` its
    traced output types) squeezes axis 1 of the final states instead of axis 0, so that a batch
    other than 1 gives states of (layers, 1, batch, hidden) and the ONNX graph declares a rank
    its LSTM does not compute. On those releases the layer's states are squeezed as torch 2.13
    does while tracing."""
    if torch_release() >= (2, 13):
        yield
        return
    from torch._decomp import decompositions

    original = decompositions.one_layer_lstm

    @functools.wraps(original)
    def one_layer_lstm(inp, hidden, params, has_biases, reverse=False):
        out, states = original(inp, hidden, params, has_biases, reverse)
        return out, tuple(state.squeeze(0) if state.dim() == 3 else state for state in states)

    decompositions.one_layer_lstm = one_layer_lstm
    try:
        yield
    finally:
        decompositions.one_layer_lstm = original


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
            _patches._register_rnn_while_loop_decomposition(ops[0], _lstm),
            _patches._register_rnn_while_loop_decomposition(ops[1], _single_state(_gru_layer)),
            _patches._register_rnn_while_loop_decomposition(
                ops[2], _single_state(functools.partial(_elman_layer, nonlinearity=torch.tanh))
            ),
            _patches._register_rnn_while_loop_decomposition(
                ops[3], _single_state(functools.partial(_elman_layer, nonlinearity=torch.relu))
            ),
        ):
            yield
    finally:
        _clear_dispatch_caches(ops)


def _clear_dispatch_caches(ops) -> None:
    for op in ops:
        cache = getattr(op, "_dispatch_cache", None)
        if cache is not None:
            cache.clear()
