"""Bad input, one by one: each fails with its documented ExportError subclass and a message that
says what to change, before anything is written."""

from __future__ import annotations

import os
import re

import pytest
import torch

import fastonnx
from fastonnx import ArgumentError, ConversionError, ExportError, TraceError, WriteError
from support import TwoInTwoOut, two_in_two_out_args


def _fails(error: type[ExportError], fragment: str, model=None, args=None, *rest, **kwargs) -> str:
    with pytest.raises(error) as info:
        model = TwoInTwoOut() if model is None else model
        fastonnx.export(model, two_in_two_out_args() if args is None else args, *rest, **kwargs)
    message = str(info.value)
    assert isinstance(info.value, ExportError)
    assert fragment in message, message
    return message


@pytest.mark.parametrize(
    "model, fragment",
    [
        (lambda x: x, "model must be a torch.nn.Module or a torch.export.ExportedProgram, got function"),
        ("model.pt", "got str"),
        (None.__class__, "got type"),
    ],
)
def test_model_that_is_not_a_module(model, fragment):
    _fails(ArgumentError, fragment, model)


@pytest.mark.parametrize("args, got", [([torch.randn(2, 4)], "list"), ({"x": torch.randn(2, 4)}, "dict"), (3, "int")])
def test_args_that_are_not_a_tuple(args, got):
    _fails(ArgumentError, f"args must be a tuple of example inputs (or one tensor), got {got}", torch.nn.ReLU(), args)


def test_a_lone_tensor_is_accepted_as_args():
    result = fastonnx.export(torch.nn.ReLU(), torch.randn(3))
    assert result.input_names == ["input"]


def test_kwargs_that_are_not_a_dict():
    _fails(ArgumentError, "kwargs must be a dict, got list", kwargs=[1])


def test_weights_on_the_meta_device():
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    message = _fails(ArgumentError, "weight(s) are on the meta device", model, (torch.empty(2, 4, device="meta"),))
    assert "`0.weight`" in message and "model.to_empty(device='cpu')" in message and "load_state_dict" in message


def test_exported_program_with_weights_on_the_meta_device():
    with torch.device("meta"):
        ep = torch.export.export(torch.nn.Linear(4, 3), (torch.empty(2, 4),))
    _fails(ArgumentError, "2 weight(s) are on the meta device", ep, ())


def test_meta_inputs_without_weights_export():
    """Tracing needs only shapes: a model without weights exports from meta inputs."""
    proto = fastonnx.export(torch.nn.ReLU(), (torch.empty(2, 3, device="meta"),)).model_proto
    assert [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == [2, 3]


def test_meta_inputs_with_weights_on_cpu():
    message = _fails(TraceError, "devices", torch.nn.Linear(4, 3), (torch.empty(2, 4, device="meta"),))
    # torch's words: "found at least two devices" (2.13 on), "found two different devices" before.
    assert re.search(r"found (at least )?two (different )?devices", message), message


@pytest.mark.parametrize(
    "where, fragment",
    [
        ("missing/m.onnx", "missing does not exist; create it first"),
        ("file/m.onnx", "file is not a directory"),
        ("dir", "it is a directory; give a file name"),
        ("a" * 300 + ".onnx", "File name too long"),
    ],
)
def test_path_that_cannot_be_written(tmp_path, where, fragment):
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    message = _fails(WriteError, fragment, None, None, str(tmp_path / where))
    assert message.startswith(f"cannot write {tmp_path / where}")
    assert sorted(os.listdir(tmp_path)) == ["dir", "file"], "nothing may be left behind"


def test_directory_without_write_permission(tmp_path):
    if os.geteuid() == 0:  # root writes through permission bits; sysfs refuses even root
        path = "/sys/fastonnx-test.onnx"
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        path = str(tmp_path / "ro" / "m.onnx")
    _fails(WriteError, f"cannot write {path}: ", None, None, path)


def test_a_long_file_name_that_fits_is_written(tmp_path):
    """The temporary name must not be what makes a valid name too long."""
    path = tmp_path / ("m" * 250 + ".onnx")
    fastonnx.export(TwoInTwoOut(), two_in_two_out_args(), str(path))
    assert os.listdir(tmp_path) == [path.name]


@pytest.mark.parametrize("f", [5, b"m.onnx", object()])
def test_path_of_the_wrong_type(f):
    _fails(ArgumentError, "f must be a path (str or os.PathLike) or None", None, None, f)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        # names past the inputs name the weights: too many is more than both
        ({"input_names": [f"n{i}" for i in range(40)]}, "input_names has 40 names but the model has 2 tensor inputs and"),
        ({"output_names": ["a", "b", "c"]}, "output_names has 3 names but the model has 2 tensor outputs"),
        ({"input_names": ["a", "a"]}, "input_names has duplicate names: ['a']"),
        ({"output_names": ("o", "o")}, "output_names has duplicate names: ['o']"),
        ({"input_names": ["x"], "output_names": ["x"]}, "input_names and output_names share ['x']"),
        ({"input_names": "x"}, "input_names must be a list of non-empty strings, got 'x'"),
        ({"input_names": ["x", ""]}, "input_names must be a list of non-empty strings"),
        ({"output_names": 7}, "output_names must be a list of non-empty strings, got 7"),
    ],
)
def test_names(kwargs, fragment):
    _fails(ArgumentError, fragment, **kwargs)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"dynamo": True}, "`dynamo` is a torch.onnx.export argument fastonnx does not take: fastonnx chooses its "
                           "front end with tracer="),
        ({"custom_translation_table": {"add": lambda x: x}}, "a key must be a torch op (torch.ops.aten.add.Tensor)"),
        ({"colour": True}, "`colour` is not an argument of fastonnx.export\nit accepts: model, args, f, kwargs,"),
        ({"opset": 17}, "`opset` is not an argument of fastonnx.export; did you mean `opset_version`?"),
        ({"input_name": ["x"]}, "did you mean `input_names`?"),
    ],
)
def test_unknown_keyword(kwargs, fragment):
    _fails(ArgumentError, fragment, **kwargs)


def test_too_many_positional_arguments(tmp_path):
    _fails(ArgumentError, "the signature is export(model, args=(), f=None, *, kwargs=None,", None, None,
           str(tmp_path / "m.onnx"), ["x"])


@pytest.mark.parametrize("opset", [12, 29, 0, -1, "18", 18.0, True])
def test_opset_out_of_range(opset):
    _fails(ArgumentError, f"opset_version={opset!r} is not supported; fastonnx produces opsets 13 to 28", opset_version=opset)


def test_dtype_onnx_cannot_hold():
    x = torch.randn(3, dtype=torch.complex64).to(torch.complex32)
    message = _fails(ConversionError, "input `x`: dtype complex32 has no ONNX equivalent", torch.nn.Identity(), (x,),
                     input_names=["x"])
    assert "torch.view_as_real" in message


def test_complex_arithmetic():
    class Halve(torch.nn.Module):
        def forward(self, z):
            return z / 2

    message = _fails(ConversionError, "aten::div.Tensor (FX node `div`): complex tensors are not supported by this "
                     "converter (ONNX Div)",
                     Halve(), (torch.randn(3, dtype=torch.complex64),))
    assert "torch.view_as_real" in message


def test_tracing_fails():
    class DataDependent(torch.nn.Module):
        def forward(self, x):
            return x if x.sum() > 0 else -x

    message = _fails(TraceError, "torch.export.export failed to trace DataDependent: GuardOnDataDependentSymNode",
                     DataDependent(), (torch.randn(3),), tracer="export")
    assert "Could not guard on data-dependent expression" in message  # PyTorch's own words


class NonzeroCount(torch.nn.Module):
    def forward(self, x):
        if x.nonzero().shape[0] > 2:  # a data-dependent guard
            return x + 1
        return x - 1


def test_trace_error_names_the_guard_and_its_source_line():
    message = _fails(TraceError, "failed to trace NonzeroCount: GuardOnDataDependentSymNode: Could not guard on "
                     "data-dependent expression", NonzeroCount(), (torch.randn(4, 3),), tracer="export")
    first = message.splitlines()[:3]
    assert first[1] == f"  at {__file__}:{NonzeroCount.forward.__code__.co_firstlineno + 1}, in forward", message
    assert first[2].strip() == "if x.nonzero().shape[0] > 2:  # a data-dependent guard"


def test_trace_error_finds_the_cause_torch_wraps(monkeypatch):
    """torch.export raised a SystemError whose __cause__ is the guard (GLM-4-MoE-lite, OpenAI's
    privacy filter): the message starts from the guard, and the chain stays."""
    export = torch.export.export

    def wrapped(*args, **kwargs):
        try:
            return export(*args, **kwargs)
        except Exception as e:
            raise SystemError("error return without exception set") from e

    monkeypatch.setattr(torch.export, "export", wrapped)
    with pytest.raises(TraceError) as info:
        fastonnx.export(NonzeroCount(), (torch.randn(4, 3),), tracer="export")
    message = str(info.value)
    assert message.startswith("torch.export.export failed to trace NonzeroCount: GuardOnDataDependentSymNode: ")
    assert "if x.nonzero().shape[0] > 2:" in message.splitlines()[2]
    assert "(torch.export raised SystemError: error return without exception set)" in message
    assert isinstance(info.value.__cause__, SystemError)
    assert type(info.value.__cause__.__cause__).__name__ == "GuardOnDataDependentSymNode"


def test_trace_error_of_a_data_dependent_size():
    class ZerosOfSum(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(int(x.sum()))

    # (a positive sum: eager runs, so the trace is what fails)
    message = _fails(TraceError, "GuardOnDataDependentSymNode", ZerosOfSum(), (torch.rand(4, 3),), tracer="export")
    assert message.splitlines()[2].strip() == "return torch.zeros(int(x.sum()))"


def test_argument_errors_are_type_and_value_errors():
    """Code written against Python's conventions (or torch.onnx) still catches them."""
    with pytest.raises(TypeError):
        fastonnx.export(TwoInTwoOut(), [torch.randn(2, 4)])
    with pytest.raises(ValueError):
        fastonnx.export(TwoInTwoOut(), two_in_two_out_args(), opset_version=99)
    assert issubclass(WriteError, OSError)


def test_bad_input_leaves_an_earlier_file_untouched(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"earlier model")
    for kwargs in ({"opset_version": 99}, {"input_names": [f"n{i}" for i in range(40)]}, {"dynamo": True}):
        with pytest.raises(ArgumentError):
            fastonnx.export(TwoInTwoOut(), two_in_two_out_args(), str(path), **kwargs)
    assert path.read_bytes() == b"earlier model"
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_example_inputs_eager_refuses_are_blamed_as_such():
    """An int64 tensor into a Linear: the conversion fails on MatMul's types, a symptom; eager
    PyTorch refuses the same call, and its error is the one given."""
    message = _fails(ArgumentError, "do not run in the model itself", torch.nn.Linear(4, 2), (torch.ones(3, 4, dtype=torch.int64),))
    assert "mat1 and mat2 must have the same dtype" in message and "MatMul" not in message


def test_a_numpy_input_is_an_argument_error_before_tracing(monkeypatch):
    import numpy as np

    traced = []
    monkeypatch.setattr(torch.export, "export", lambda *a, **k: traced.append(a))
    message = _fails(ArgumentError, "args[1] is a numpy.ndarray", TwoInTwoOut(), (torch.ones(2, 4), np.ones((2, 4))))
    assert "torch.from_numpy" in message and not traced


def test_an_input_of_the_wrong_shape_is_blamed_with_torch_log_lines_kept_in_the_error(capfd):
    """The trace fails; eager fails on the same input, so the error blames the input (eager's own
    message) and keeps torch's log lines of the failed trace instead of printing them."""
    with pytest.raises(ArgumentError, match="(?s)do not run in the model itself.*mat1 and mat2 shapes") as info:
        fastonnx.export(torch.nn.Linear(4, 2), (torch.ones(3, 5),))
    err = capfd.readouterr().err
    assert "failed while attempting to run meta" not in err  # torch's 20-line traceback, not printed
    assert any("failed while attempting to run meta" in line for line in info.value.torch_log)


def test_report_path_and_verify_are_checked_before_any_work(tmp_path):
    path = tmp_path / "m.onnx"
    _fails(WriteError, "does not exist", TwoInTwoOut(), None, str(path), report=str(tmp_path / "missing" / "r.md"))
    assert not path.exists()
    with torch.device("meta"):
        meta = torch.nn.Linear(4, 2)
    weights = {"weight": torch.randn(2, 4), "bias": torch.randn(2)}
    _fails(ArgumentError, "verify=True runs the model in PyTorch", meta, (torch.ones(3, 4),), str(path), weights=weights, verify=True)
    assert not path.exists()


def test_a_file_that_cannot_point_into_the_checkpoint_is_refused_before_tracing(tmp_path):
    """weights_mode="reference" writes a model whose external data is the checkpoint's file, found
    relative to the model: one saved outside the checkpoint's directory is refused before the
    trace (which this model's forward would fail), not after the whole export."""
    from safetensors.torch import save_file

    class Untraceable(torch.nn.Linear):
        def forward(self, x):
            raise AssertionError("traced")

    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "out").mkdir()
    save_file({"weight": torch.randn(2, 4), "bias": torch.randn(2)}, str(tmp_path / "checkpoint" / "model.safetensors"))
    with torch.device("meta"):
        model = Untraceable(4, 2)
    path = tmp_path / "out" / "m.onnx"
    args = (torch.ones(3, 4),)
    _fails(ArgumentError, 'weights_mode="reference"', model, args, str(path), weights=tmp_path / "checkpoint", weights_mode="reference")
    assert not path.exists()


def test_unsupported_library_ops_are_pointed_at_register_converter():
    @torch.library.custom_op("fastonnx_test_bad::untraceable", mutates_args=())
    def untraceable(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(x.numpy() * 2)

    @untraceable.register_fake
    def _(x):
        return torch.empty_like(x)

    class Calls(torch.nn.Module):
        def forward(self, x):
            return untraceable(x) + 1

    message = _fails(fastonnx.UnsupportedOpsError, "fastonnx_test_bad::untraceable", Calls(), (torch.ones(3),))
    assert "codegen/mappings" not in message and message.endswith("(README, 'Custom converters').")


@pytest.mark.parametrize("tracer", ["auto", "jit"])
def test_a_library_op_with_no_kernel_at_all_is_said_once(tracer):
    """Neither tracer can run an op with no kernel and no fake implementation: the error says so
    once, names the op and the user's line, and says what to register, without torch's messages
    (its list of every dispatch key the op has) for each tracer."""
    if not hasattr(torch.ops.fastonnx_test_bad, "no_kernel"):
        torch.library.define("fastonnx_test_bad::no_kernel", "(Tensor x) -> Tensor")

    class Calls(torch.nn.Module):
        def forward(self, x):
            return torch.ops.fastonnx_test_bad.no_kernel(x) + 1

    with pytest.raises(TraceError) as info:
        fastonnx.export(Calls(), (torch.randn(2, 3),), tracer=tracer)
    message = str(info.value)
    assert message.startswith("fastonnx_test_bad::no_kernel has no kernel and no fake implementation"), message
    assert "return torch.ops.fastonnx_test_bad.no_kernel(x) + 1" in message
    assert 'torch.library.register_fake("fastonnx_test_bad::no_kernel")' in message
    assert "TorchScript front end failed too" not in message and "Could not run" not in message
    assert len(message.splitlines()) == 4, message


def test_a_library_op_with_a_kernel_and_no_fake_implementation_is_traced_by_torch_jit():
    """An op torch.export cannot run (no fake implementation) but eager can is no op without a
    kernel: the TorchScript front end traces it (here through its Python kernel)."""
    if not hasattr(torch.ops.fastonnx_test_bad, "cpu_only"):
        torch.library.define("fastonnx_test_bad::cpu_only", "(Tensor x) -> Tensor")
        torch.library.impl("fastonnx_test_bad::cpu_only", "cpu", func=lambda x: x * 2)

    class Calls(torch.nn.Module):
        def forward(self, x):
            return torch.ops.fastonnx_test_bad.cpu_only(x) + 1

    with pytest.warns(fastonnx.TracerFallbackWarning, match="fake impl"):
        result = fastonnx.export(Calls(), (torch.randn(2, 3),))
    assert [n.op_type for n in result.model_proto.graph.node] == ["Mul", "Add"]
