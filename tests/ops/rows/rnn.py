"""Recurrent layers, as torch.export records nn.LSTM, nn.GRU and nn.RNN modules (random weights,
eval mode, initial states given: without them torch.export adds aten.zeros), and over padded
batches with lengths, as the TorchScript front end records packed sequences."""

import torch
from row import hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

import fastonnx.frontends.jit.packed_rnn  # noqa: F401  # declares torch.ops.fastonnx.padded_rnn

# (input_size, hidden_size, module options)
CONFIGS = [
    (4, 5, {}),
    (3, 4, dict(num_layers=2, batch_first=True, bidirectional=True, dropout=0.3)),  # no dropout in eval
    (4, 3, dict(num_layers=3, bias=False, bidirectional=True)),
    (2, 6, dict(num_layers=2, bias=False, batch_first=True)),
]
SEQ_LEN, BATCH = 5, 2

# onnxruntime's recurrent kernels and torch sum the gate products in different orders; in float16
# onnxruntime rounds every gate and state to float16 where torch keeps them in float32 within a
# step (values here are within [-1, 1], the float16 ulp at most 2**-11).
TOLERANCE = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 2e-3)}
FLOATS = (torch.float32, torch.float16)


def _states(module, dtype, n: int):
    """h0 (and c0): h has proj_size features when an LSTM projects its hidden state."""
    layers = module.num_layers * (2 if module.bidirectional else 1)
    sizes = [getattr(module, "proj_size", 0) or module.hidden_size, module.hidden_size][:n]
    return tuple(tensor((layers, BATCH, size), dtype, low=-1, high=1) for size in sizes)


def _samples(make, n_states: int, extra=()):
    """A sample per CONFIGS entry, then per (module factory, sequence length) of ``extra``."""

    def samples(dtype):
        modules = [(make(input_size, hidden_size, **options), SEQ_LEN) for input_size, hidden_size, options in CONFIGS]
        for module, seq_len in [*modules, *((factory(), seq_len) for factory, seq_len in extra)]:
            module = module.to(dtype).eval()
            shape = (BATCH, seq_len) if module.batch_first else (seq_len, BATCH)
            x = tensor((*shape, module.input_size), dtype, low=-1, high=1)
            states = _states(module, dtype, n_states)
            yield SampleInput(x, args=(states if n_states > 1 else states[0],), kwargs={"module": module})

    return samples


def _run(x, hx, module):
    return module(x, hx)


# LSTMs that project their hidden state (proj_size): ONNX's LSTM computes all but the first step.
PROJECTED = (
    (lambda: torch.nn.LSTM(4, 5, num_layers=2, proj_size=3), SEQ_LEN),
    (lambda: torch.nn.LSTM(3, 4, num_layers=2, proj_size=2, bias=False, batch_first=True, bidirectional=True), SEQ_LEN),
    (lambda: torch.nn.LSTM(3, 4, proj_size=2, bidirectional=True), 1),
)



def _padded_samples(dtype):
    """fastonnx::padded_rnn as the TorchScript front end records a packed-sequence layer: a
    time-major padded batch whose entries have lengths in any order, one of them 1 (a projecting
    LSTM computes an entry's first step apart) and one the whole sequence."""
    modules = (
        torch.nn.LSTM(4, 5),
        torch.nn.LSTM(3, 4, num_layers=2, bidirectional=True),
        torch.nn.LSTM(4, 5, num_layers=2, proj_size=3),
        torch.nn.LSTM(3, 4, num_layers=2, proj_size=2, bias=False, bidirectional=True),
        torch.nn.GRU(3, 4, num_layers=2, bidirectional=True),
        torch.nn.GRU(4, 3, bias=False),
        torch.nn.RNN(4, 3, num_layers=2, bidirectional=True),
        torch.nn.RNN(3, 4, nonlinearity="relu", bidirectional=True),
    )
    lengths = torch.tensor([3, SEQ_LEN, 1])
    for module in modules:
        module = module.to(dtype).eval()
        x = tensor((SEQ_LEN, len(lengths), module.input_size), dtype, low=-1, high=1)
        layers = module.num_layers * (2 if module.bidirectional else 1)
        sizes = [getattr(module, "proj_size", 0) or module.hidden_size, module.hidden_size]
        states = [tensor((layers, len(lengths), size), dtype, low=-1, high=1) for size in sizes]
        n_states = 2 if isinstance(module, torch.nn.LSTM) else 1
        yield SampleInput(x, args=(lengths, states[:n_states]), kwargs={"module": module})


def _padded_rnn(x, lengths, hx, module):
    mode = {torch.nn.LSTM: "lstm", torch.nn.GRU: "gru"}.get(type(module)) or f"rnn_{module.nonlinearity}"
    return torch.ops.fastonnx.padded_rnn(
        mode, x, lengths, hx, module._flat_weights, module.bias, module.num_layers, module.bidirectional
    )


ROWS = (
    hand_written(
        "lstm.input",
        fn=_run,
        samples=_samples(torch.nn.LSTM, 2, extra=PROJECTED),
        max_samples=8,  # every sample, float16 included
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    hand_written("gru.input", fn=_run, samples=_samples(torch.nn.GRU, 1), dtypes=FLOATS, tolerance=TOLERANCE),
    hand_written(
        "rnn_tanh.input",
        fn=_run,
        samples=_samples(lambda *a, **kw: torch.nn.RNN(*a, nonlinearity="tanh", **kw), 1),
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    hand_written(
        "rnn_relu.input",
        fn=_run,
        samples=_samples(lambda *a, **kw: torch.nn.RNN(*a, nonlinearity="relu", **kw), 1),
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
    hand_written(
        "fastonnx::padded_rnn",
        fn=_padded_rnn,
        samples=_padded_samples,
        max_samples=8,  # every sample
        dtypes=FLOATS,
        tolerance=TOLERANCE,
    ),
)
