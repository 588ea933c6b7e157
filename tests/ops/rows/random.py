"""Random tensors. ONNX's generators cannot reproduce torch's values, so these rows check the
shape and dtype of each output, the range of its values and, for samples large enough, their
mean and variance (within 6 standard errors: a false failure is far less likely than 1e-6)."""

import math

import torch
from row import SampleRule, aten, hand_written, tensor
from torch.testing._internal.opinfo.core import SampleInput

# Sizes of the draws; the last is large enough for the statistics to say something.
SIZES = [(), (7,), (3, 4), (0, 3), (200, 100)]
MIN_STATISTICS_SAMPLE = 1000


def _near(what: str, value: float, expected: float, variance: float) -> None:
    bound = 6 * math.sqrt(variance)
    assert abs(value - expected) <= bound, f"{what} {value:.5f}, expected {expected:.5f} +- {bound:.5f}"


def _moments(got: torch.Tensor, mean: float, var: float, fourth_moment: float) -> None:
    """Sample mean and variance of ``got`` against a distribution's (standard errors from its
    variance and fourth central moment)."""
    n = got.numel()
    if n < MIN_STATISTICS_SAMPLE:
        return
    values = got.double().flatten()
    _near("mean", values.mean().item(), mean, var / n)
    _near("variance", values.var().item(), var, (fourth_moment - var**2) / n)


def _uniform(got, want, sample) -> None:
    assert ((got >= 0) & (got < 1)).all(), "uniform values outside [0, 1)"
    _moments(got, 0.5, 1 / 12, 1 / 80)


def _normal(got, want, sample) -> None:
    assert torch.isfinite(got).all(), "normal values that are not finite"
    _moments(got, 0.0, 1.0, 3.0)


def _permutation(got, want, sample) -> None:
    assert torch.equal(got.sort().values, torch.arange(got.numel(), dtype=got.dtype)), "not a permutation of 0..n-1"


def _trials(got: torch.Tensor, p: torch.Tensor) -> None:
    """Bernoulli trials ``got`` with success probabilities ``p`` (broadcast)."""
    p = p.double().expand(got.shape)
    outcome = got.double()
    assert ((outcome == 0) | (outcome == 1)).all(), "Bernoulli outcomes other than 0 and 1"
    assert (outcome[p == 0] == 0).all() and (outcome[p == 1] == 1).all(), "outcomes of probability 0 or 1 differ"
    if got.numel() >= MIN_STATISTICS_SAMPLE:
        _near("successes", outcome.sum().item(), p.sum().item(), (p * (1 - p)).sum().item())


def _factory(dtype):
    for size in SIZES:
        yield SampleInput(size, kwargs={"dtype": dtype})


def _like(dtype):
    for size in SIZES:
        yield SampleInput(tensor(size, dtype))
    yield SampleInput(tensor((3, 4), torch.int64), kwargs={"dtype": dtype})


def _randperm(dtype):
    for n in [0, 1, 7, 1000]:
        yield SampleInput(n, kwargs={"dtype": dtype})


def _probabilities(dtype):
    for size in SIZES:
        yield SampleInput(tensor(size, dtype, low=0, high=1))
    yield SampleInput(torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=dtype))


def _fixed_probability(dtype):
    for p in [0.0, 0.3, 1.0]:
        for size in [(3, 4), (200, 100)]:
            yield SampleInput(tensor(size, dtype), args=(p,))


def _integers(low: int, high: int):
    """Integers uniform in [low, high)."""
    n = high - low

    def compare(got, want, sample) -> None:
        in_range = (got >= low) & (got < high) & (got == got.round())
        assert in_range.all(), f"values outside the integers of [{low}, {high})"
        _moments(got, (low + high - 1) / 2, (n * n - 1) / 12, (n * n - 1) * (3 * n * n - 7) / 240)

    return compare


def _int_factory(dtype):
    for size in SIZES:
        yield SampleInput(size, kwargs={"dtype": dtype})


def _int_like(dtype):
    for size in SIZES:
        yield SampleInput(tensor(size, torch.float32), kwargs={"dtype": dtype})
    yield SampleInput(tensor((3, 4), dtype))


def _mean_std(dtype):
    """Means of 3 and deviations of 2, broadcast against each other."""
    for mean_shape, std_shape in [((7,), (7,)), ((200, 100), (200, 100)), ((200, 1), (100,))]:
        yield SampleInput(torch.full(mean_shape, 3.0, dtype=dtype), args=(torch.full(std_shape, 2.0, dtype=dtype),))


def _shifted_normal(got, want, sample) -> None:
    assert got.shape == want.shape, f"shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    _normal((got.double() - 3) / 2, want, sample)


def _weights(dtype):
    """Rows with one nonzero weight: every draw is that index, with replacement or without."""
    rows = torch.tensor([[0, 10, 0, 0], [0, 0, 100, 0], [1, 0, 0, 0]], dtype=dtype)
    yield SampleInput(rows, args=(3,), kwargs={"replacement": True})
    yield SampleInput(rows, args=(1,))
    yield SampleInput(rows[1], args=(5,), kwargs={"replacement": True})


FLOATS = (torch.float32, torch.float16, torch.float64)
# ONNX opset 22 gave the random ops new versions (bfloat16); onnxruntime registers kernels only
# for their first versions.
NO_KERNEL_AT_22 = (
    SampleRule("onnxruntime 1.32 has no kernel for RandomUniform/RandomNormal(Like) at opset 22+", opsets=range(22, 1000)),
)

ROWS = (
    hand_written("rand", fn=lambda size, **kw: torch.rand(size, **kw), samples=_factory, dtypes=FLOATS, compare=_uniform, xfails=NO_KERNEL_AT_22),
    hand_written("randn", fn=lambda size, **kw: torch.randn(size, **kw), samples=_factory, dtypes=FLOATS, compare=_normal, xfails=NO_KERNEL_AT_22),
    hand_written("rand_like", fn=torch.rand_like, samples=_like, dtypes=FLOATS, compare=_uniform, xfails=NO_KERNEL_AT_22),
    hand_written("randn_like", fn=torch.randn_like, samples=_like, dtypes=FLOATS, compare=_normal, xfails=NO_KERNEL_AT_22),
    hand_written(
        "randperm",
        fn=lambda n, **kw: torch.randperm(n, **kw),
        samples=_randperm,
        dtypes=(torch.int64, torch.int32, torch.float32),
        compare=_permutation,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "bernoulli",
        fn=torch.bernoulli,
        samples=_probabilities,
        dtypes=FLOATS,
        compare=lambda got, want, sample: _trials(got, sample.input),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "randint.low",
        fn=lambda size, **kw: torch.randint(3, 9, size, **kw),
        samples=_int_factory,
        dtypes=(torch.int64, torch.int32, torch.float32),
        compare=_integers(3, 9),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "randint",
        fn=lambda size, **kw: torch.randint(5, size, **kw),
        samples=_int_factory,
        dtypes=(torch.int64,),
        compare=_integers(0, 5),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "randint_like.low_dtype",
        fn=lambda x, **kw: torch.randint_like(x, -2, 6, **kw),
        samples=_int_like,
        dtypes=(torch.int64, torch.float32),
        compare=_integers(-2, 6),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "randint_like",
        fn=lambda x, **kw: torch.randint_like(x, 4, **kw),
        samples=_int_like,
        dtypes=(torch.int64,),
        compare=_integers(0, 4),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "normal.Tensor_Tensor",
        fn=lambda mean, std: torch.normal(mean, std),
        samples=_mean_std,
        dtypes=(torch.float32, torch.float64),
        compare=_shifted_normal,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "normal.Tensor_float",
        fn=lambda mean, std: torch.normal(mean, 2.0),
        samples=_mean_std,
        dtypes=(torch.float32, torch.float64),
        compare=_shifted_normal,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "normal.float_Tensor",
        fn=lambda mean, std: torch.normal(3.0, std),
        samples=_mean_std,
        dtypes=(torch.float32, torch.float64),
        compare=_shifted_normal,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "normal_functional",
        fn=lambda mean, std: aten.normal_functional(mean, 3.0, 2.0),
        samples=_mean_std,
        dtypes=(torch.float32, torch.float64),
        compare=_shifted_normal,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "normal_",
        fn=lambda mean, std: mean.clone().normal_(3.0, 2.0),
        samples=_mean_std,
        dtypes=(torch.float32, torch.float64),
        compare=_shifted_normal,
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "multinomial",
        fn=lambda w, n, **kw: torch.multinomial(w, n, **kw),
        samples=_weights,
        dtypes=(torch.float32, torch.float64),
        compare=lambda got, want, sample: torch.testing.assert_close(got, want),
        xfails=NO_KERNEL_AT_22,
    ),
    hand_written(
        "bernoulli.p",
        fn=lambda x, p: aten.bernoulli.p(x, p),
        samples=_fixed_probability,
        dtypes=FLOATS,
        compare=lambda got, want, sample: _trials(got, torch.tensor(sample.args[0])),
        xfails=NO_KERNEL_AT_22,
    ),
)
