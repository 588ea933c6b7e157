"""fastonnx.export's arguments, errors and files."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
import torch

import fastonnx
from fastonnx.core.version import supported_torch
from fastonnx.lowering import lower as _lower
from fastonnx.lowering import op_table as _op_table
from support import Lambda, TwoInTwoOut, assert_matches, check, export_and_compare, run_ort, two_in_two_out_args


def test_writes_file_and_result(tmp_path):
    path = tmp_path / "m.onnx"
    result = fastonnx.export(TwoInTwoOut(), two_in_two_out_args(), str(path))
    loaded = onnx.load(str(path))
    check(loaded)
    assert loaded.SerializeToString() == result.model_proto.SerializeToString()
    assert [i.name for i in loaded.graph.input] == ["x", "y"]
    assert result.input_names == ["x", "y"]
    assert {"lin.weight", "lin.bias"} <= {i.name for i in loaded.graph.initializer}
    assert not [p for p in os.listdir(tmp_path) if p != "m.onnx"], "temporary files left behind"


def test_lone_tensor_args_and_exported_program():
    model = torch.nn.ReLU()
    x = torch.randn(3)
    assert run_ort(fastonnx.export(model, x).model_proto, [x])[0].shape == (3,)
    ep = torch.export.export(model, (x,))
    proto = fastonnx.export(ep).model_proto
    check(proto)
    assert len(proto.graph.node) == 1
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]), model(x))


def test_input_and_output_names_partial():
    proto = fastonnx.export(
        TwoInTwoOut(), two_in_two_out_args(), input_names=["a"], output_names=["logits"]
    ).model_proto
    assert [i.name for i in proto.graph.input] == ["a", "y"]
    assert proto.graph.output[0].name == "logits"
    check(proto)


def test_output_name_taken_by_an_intermediate_value():
    class M(torch.nn.Module):
        def forward(self, x):
            return (x + 1).relu()

    proto = fastonnx.export(M(), (torch.randn(2),), output_names=["add"]).model_proto
    check(proto)
    assert proto.graph.output[0].name == "add"
    assert len({o for n in proto.graph.node for o in n.output}) == len(proto.graph.node)


def test_passthrough_output_gets_identity():
    class M(torch.nn.Module):
        def forward(self, x):
            return x, x.clone(), torch.nn.functional.dropout(x, 0.5, training=False)

    x = torch.randn(2, 3)
    proto = export_and_compare(M(), (x,))
    assert len({o.name for o in proto.graph.output}) == 3


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"input_names": [f"n{i}" for i in range(40)]}, ValueError, "40 names but the model has 2 tensor inputs and"),
        ({"output_names": ["a", "b", "c"]}, ValueError, "3 names but the model has 2 tensor outputs"),
        ({"input_names": ["a", "a"]}, ValueError, "duplicate names: ['a']"),
        ({"input_names": "x"}, TypeError, "list of non-empty strings"),
        ({"opset_version": 9}, ValueError, "opsets 13 to 28"),
        ({"opset_version": 99}, ValueError, "opsets 13 to 28"),
    ],
)
def test_bad_arguments(kwargs, error, fragment):
    with pytest.raises(error) as info:
        fastonnx.export(TwoInTwoOut(), two_in_two_out_args(), **kwargs)
    assert fragment in str(info.value)


def test_bad_model_and_args():
    with pytest.raises(TypeError, match="torch.nn.Module or a torch.export.ExportedProgram"):
        fastonnx.export(lambda x: x, (torch.randn(1),))
    with pytest.raises(TypeError, match="args must be a tuple"):
        fastonnx.export(torch.nn.ReLU(), [torch.randn(1)])


def test_unwritable_path_fails_before_tracing(tmp_path):
    with pytest.raises(fastonnx.WriteError, match="does not exist"):
        fastonnx.export(torch.nn.ReLU(), (torch.randn(1),), str(tmp_path / "missing" / "m.onnx"))


def test_failed_export_leaves_existing_file(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"previous model")

    class Unsupported(torch.nn.Module):
        def forward(self, x):
            return torch.special.erfcx(x)

    with pytest.raises(fastonnx.UnsupportedOpsError):
        fastonnx.export(Unsupported(), (torch.randn(2),), str(path))
    assert path.read_bytes() == b"previous model"
    assert os.listdir(tmp_path) == ["m.onnx"]


def test_trace_error_keeps_pytorch_message():
    class Broken(torch.nn.Module):  # (eagerly it runs: a model eager refuses blames the inputs)
        def forward(self, x):
            if torch.compiler.is_exporting() or torch.jit.is_tracing():
                raise RuntimeError("this model cannot be traced")
            return x

    with pytest.raises(fastonnx.TraceError, match="torch.export.export failed.*this model cannot be traced"):
        fastonnx.export(Broken(), (torch.randn(1),))


def test_unsupported_ops_listed_at_once():
    class Many(torch.nn.Module):
        def forward(self, x):
            a = torch.special.erfcx(x)
            b = torch.special.erfcx(a) + torch.special.i0e(x)
            return torch.special.i0e(b) + torch.special.i0e(x)

    with pytest.raises(fastonnx.UnsupportedOpsError) as info:
        fastonnx.export(Many(), (torch.randn(3),))
    ops = {op.overload: op for op in info.value.ops}
    assert ops["aten::special_i0e"].count == 3
    assert ops["aten::special_erfcx"].count == 2
    assert "test_export_api.py" in ops["aten::special_erfcx"].first_source
    assert "special_erfcx: {onnx: ...}" in ops["aten::special_erfcx"].yaml_hint
    assert "2 op(s) have no ONNX converter and no decomposition" in str(info.value)


def test_conversion_error_names_the_node():
    class VolumeSampler(torch.nn.Module):
        def forward(self, x, grid):
            return torch.nn.functional.grid_sample(x, grid, align_corners=False)

    ep = torch.export.export(VolumeSampler(), (torch.randn(1, 1, 3, 4, 4), torch.rand(1, 2, 2, 2, 3)))
    with pytest.raises(fastonnx.ConversionError, match=r"aten::grid_sampler \(FX node `grid_sampler`\).*opset 20"):
        fastonnx.export(ep, opset_version=18)


def test_model_is_traced_in_eval_mode_and_mode_restored():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5), torch.nn.BatchNorm1d(4)).train()
    proto = fastonnx.export(model, (torch.randn(3, 4),)).model_proto
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    x = torch.randn(3, 4)
    torch.testing.assert_close(torch.from_numpy(run_ort(proto, [x])[0]), model(x).detach(), rtol=1e-4, atol=1e-5)


def test_inplace_on_aliased_tensor_is_functionalized():
    class Aliased(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            z = y.view(-1)
            y.add_(1)  # z sees this through the shared storage
            return z, y

    export_and_compare(Aliased(), (torch.randn(2, 3),))


def test_inplace_on_a_split_of_a_tensor_is_seen_by_the_tensor():
    """The pieces split, unbind and chunk return (operator.getitem of the op's list) are views of
    the tensor: a write to one is read through the tensor after it."""

    class Pieces(torch.nn.Module):
        def forward(self, x):
            buf = x * 1
            a, _ = buf.split(2)
            a.add_(1)
            rows = buf.unbind(0)
            rows[3].mul_(3)
            return buf + 0

    export_and_compare(Pieces(), (torch.randn(4, 3),))


def test_tensor_written_through_views_is_functionalized_alone(monkeypatch):
    """A mask the model builds by writing slices of a tensor it made (swin's shifted windows),
    with every size dynamic: only those nodes are traced again, not the whole program, and the
    model matches eager at other sizes too."""

    class Mask(torch.nn.Module):
        def forward(self, x):
            y = x.sin()
            mask = x.new_zeros(x.shape[-2:])
            flat = mask.view(-1)  # a view of it taken before the writes, read after
            count = 0
            for h in ((0, -2), (-2, None)):
                for w in ((0, -3), (-3, None)):
                    mask[h[0] : h[1], w[0] : w[1]] = count
                    count += 1
            mask[:, 0] += 1
            return y + mask, flat.sum() * y.cos()

    def no_whole_program_retrace(*args, **kwargs):
        raise AssertionError("functionalized the whole program")

    monkeypatch.setattr(torch.export.ExportedProgram, "run_decompositions", no_whole_program_retrace)
    dims = torch.export.Dim.AUTO
    proto = export_and_compare(Mask(), (torch.randn(2, 5, 7),), dynamic_shapes=({0: dims, 1: dims, 2: dims},))
    for shape in ((3, 4, 9), (1, 6, 4)):
        assert_matches(proto, Mask(), (torch.randn(shape),), rtol=1e-3, atol=1e-4)


def test_opset_rules_pick_by_target():
    class Mean(torch.nn.Module):
        def forward(self, x):
            return x.mean(dim=[1], keepdim=True), x.mean()

    x = torch.randn(3, 4)
    for opset in (13, 17, 18, 23, 28):
        proto = export_and_compare(Mean(), (x,), opset_version=opset)
        assert proto.opset_import[0].version == opset
        reduce = next(n for n in proto.graph.node if n.op_type == "ReduceMean")
        assert (len(reduce.input) == 2) == (opset >= 18)


def test_argument_unknown_to_the_generated_converter(monkeypatch):
    """A newer torch may add a trailing defaulted argument: at its default it is dropped,
    otherwise the export fails naming it."""
    registry = dict(_op_table._registry())
    op_id, names, static = registry["hardtanh"]
    registry["hardtanh"] = (op_id, names[:-1], static)  # as if max_val were new in this torch
    monkeypatch.setattr(_op_table, "_registry", lambda: registry)
    monkeypatch.setattr(_op_table, "_PLANS", {})

    export_and_compare(torch.nn.Hardtanh(-1.0, 1.0), (torch.randn(5) * 3,))
    with pytest.raises(fastonnx.ConversionError, match="`max_val`=2.0 is new in this torch"):
        fastonnx.export(torch.nn.Hardtanh(-1.0, 2.0), (torch.randn(5),))


def test_dtype_onnx_lacks_is_a_clear_error():
    """ONNX's Atan has no bfloat16 version: a ConversionError naming the op and the types it
    takes, not a model that fails to load."""

    class Atan(torch.nn.Module):
        def forward(self, x):
            return torch.atan(x)

    x = torch.randn(3, 4).to(torch.bfloat16)
    with pytest.raises(fastonnx.ConversionError, match=r"ONNX Atan \(opset 18\) has no bfloat16 version.*float32"):
        fastonnx.export(Atan(), (x,))


def test_complex_values_are_real_pairs():
    """A complex input or output is a real tensor with a trailing (real, imaginary) dimension."""

    class Spectrum(torch.nn.Module):
        def forward(self, z):
            return torch.view_as_complex(torch.view_as_real(z) * 2), z.real

    z = torch.randn(3, 4, dtype=torch.complex64)
    proto = fastonnx.export(Spectrum(), (z,)).model_proto
    check(proto)
    for value in (proto.graph.input[0], proto.graph.output[0]):
        assert [d.dim_value for d in value.type.tensor_type.shape.dim] == [3, 4, 2]
    assert proto.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    doubled, real = run_ort(proto, [z])
    torch.testing.assert_close(torch.from_numpy(doubled), torch.view_as_real(z * 2))
    torch.testing.assert_close(torch.from_numpy(real), z.real)


def test_complex_input_to_a_converter_that_does_not_take_it():
    """Elementwise ONNX ops would misread (real, imaginary) pairs: a clear error instead."""

    class Ratio(torch.nn.Module):
        def forward(self, z):
            return z / z

    with pytest.raises(fastonnx.ConversionError, match=r"aten::div.Tensor .*complex tensors are not supported"):
        fastonnx.export(Ratio(), (torch.randn(3, dtype=torch.complex64),))


def test_supported_ops():
    ops = fastonnx.supported_ops()
    for name in ("conv2d", "add.Tensor", "relu_", "batch_norm", "max_pool2d", "linear"):
        assert name in ops
    # Python converters too: the built-in ones, and those a user registers.
    assert {"torchvision::nms", "transformers::grouped_mm_fallback", "quantized_decomposed::quantize_per_tensor"} <= set(ops)
    fastonnx.register_converter("mylib::listed", lambda g, x: x)
    try:
        assert "mylib::listed" in fastonnx.supported_ops()
    finally:
        fastonnx.unregister_converter("mylib::listed")
    assert "mylib::listed" not in fastonnx.supported_ops()


def test_the_supported_torch_is_pyprojects_requirement():
    pyproject = (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()
    dependencies = re.search(r"^dependencies = \[(.*?)^\]", pyproject, re.MULTILINE | re.DOTALL)
    assert dependencies is not None
    assert re.findall(r'"(torch[^"]*)"', dependencies.group(1)) == [supported_torch()]


def test_an_older_torch_is_one_clear_error_at_the_first_use_of_the_api():
    """Under a torch older than the supported range (torch.__version__ set in a subprocess), import
    fastonnx works (the command line's inspect needs no torch), and the first use of the API, or
    export-hf, is one error naming the installed torch and the range, not a failure deep in an export."""
    old = "import torch; torch.__version__ = '2.10.0'; "
    installed = f"the installed torch is 2.10.0 ({Path(torch.__file__).parent})"
    why = f"fastonnx {fastonnx.__version__} needs {supported_torch()}; {installed}"
    for use, error in [
        ("import fastonnx; fastonnx.__version__; from fastonnx import export", f"ImportError: {why}"),
        ("from fastonnx.__main__ import main; main(['export-hf', 'checkpoint', 'out.onnx'])", f"error: {why}"),
    ]:
        out = subprocess.run([sys.executable, "-c", old + use], capture_output=True, text=True)
        assert out.returncode == 1 and out.stdout == "", out.stderr
        assert out.stderr.strip().splitlines()[-1] == error
        assert "During handling" not in out.stderr and "direct cause" not in out.stderr


class ReturnsNumbers(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return x + 1, 3, 2.5, True, None, n, n / 2, n > 2, x.shape[1]


def test_returned_numbers_are_0d_outputs_and_none_is_dropped():
    """As torch.onnx makes them: an int is int64, a float the default float dtype, a bool bool;
    symbolic ones are computed in the graph. None is no output; names keep their positions."""
    result = fastonnx.export(ReturnsNumbers(), (torch.randn(4, 3),), dynamic_axes={"x": {0: "batch"}})
    graph = result.model_proto.graph
    names = ["output_0", "output_1", "output_2", "output_3", "output_5", "output_6", "output_7", "output_8"]
    assert result.output_names == [o.name for o in graph.output] == names
    types = [onnx.helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type).name for o in graph.output]
    assert types == ["float32", "int64", "float32", "bool", "int64", "float32", "bool", "int64"]
    assert all(len(o.type.tensor_type.shape.dim) == 0 for o in graph.output[1:])
    got = run_ort(result.model_proto, [torch.randn(7, 3)])
    assert [g.item() for g in got[1:]] == [3, 2.5, True, 7, 3.5, True, 3]
    assert all(d.ok for d in result.verify(torch.randn(2, 3)))


def test_output_names_skip_a_returned_none():
    result = fastonnx.export(ReturnsNumbers(), (torch.randn(4, 3),), output_names=["y", "three", "half", "yes", "n"])
    assert result.output_names[:6] == ["y", "three", "half", "yes", "n", "output_6"]


def test_a_returned_string_is_a_clear_error():
    class Text(torch.nn.Module):
        def forward(self, x):
            return x, "done"

    with pytest.raises(fastonnx.ExportError, match="output output_1 is 'done', not a tensor or a number"):
        fastonnx.export(Text(), (torch.randn(2),))


class KronWindow(torch.nn.Module):
    """A decomposed op (kron) reading a tensor that a decomposed op without tensor inputs
    (hann_window) made in forward."""

    def forward(self, x):
        return torch.kron(x, torch.hann_window(8))


def test_decomposing_tensors_made_in_forward():
    """Each decomposition traces under the program's fake mode: a tensor one makes and another
    reads are in one mode (they were not: a bare AssertionError, 'fake mode ... doesn't match')."""
    export_and_compare(KronWindow(), (torch.randn(3, 8),))


@pytest.mark.parametrize(
    ("loss", "shape"),
    [
        (torch.nn.NLLLoss(), (3, 5)),
        (torch.nn.NLLLoss(weight=torch.rand(5), ignore_index=2, reduction="sum"), (4, 5, 3, 2)),
        (torch.nn.NLLLoss(reduction="none"), (2, 5, 3, 4)),
        (torch.nn.CrossEntropyLoss(ignore_index=1), (3, 5, 2)),
        (torch.nn.CrossEntropyLoss(weight=torch.rand(5)), (2, 5, 4, 3)),
    ],
    ids=["nll", "nll_2d_weighted_sum", "nll_2d_none", "cross_entropy_3d", "cross_entropy_2d_weighted"],
)
def test_decompositions_returning_named_tuples(loss, shape):
    """nll_loss's decompositions (nll_loss_forward, nll_loss2d_forward) return torch's named
    `return_types` tuples, which tracing recorded as a call of their class: an unsupported op."""
    x = torch.randn(shape).log_softmax(1)
    target = torch.randint(0, 5, (shape[0], *shape[2:]))
    export_and_compare(loss, (x, target))


class Spectrogram(torch.nn.Module):
    def __init__(self, window_in_forward: bool):
        super().__init__()
        self.window_in_forward = window_in_forward
        self.register_buffer("window", torch.hann_window(16))

    def forward(self, x):
        window = torch.hann_window(16) if self.window_in_forward else self.window
        return torch.stft(x, n_fft=16, window=window, return_complex=True).abs()


@pytest.mark.parametrize("window_in_forward", [False, True], ids=["buffer", "forward"])
def test_stft_with_a_window_exports(window_in_forward):
    """stft's decomposition transposes its complex frames (an in-place transpose_, functionalized):
    Transpose of the (real, imaginary) pairs, which stay last."""
    export_and_compare(Spectrogram(window_in_forward), (torch.randn(2, 64),))


@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("n", [16, 15])
def test_real_fft_zero_imaginary_parts_are_exact(opset, n):
    """The imaginary parts of a real signal's bin 0 and (even n) bin n / 2 are exactly 0, as torch
    gives them, not a float32 DFT's rounding noise (PyTorch's suite compares them at atol 1e-7)."""
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n)) * 10
    (got,) = run_ort(
        fastonnx.export(Lambda(lambda x: torch.view_as_real(torch.fft.rfft(x))), (x,), opset_version=opset).model_proto,
        (x,),
    )
    assert (got[:, 0, 1] == 0).all()
    # An odd length has no middle bin: its bin n // 2 keeps its (nonzero) imaginary part.
    assert (got[:, n // 2, 1] == 0).all() if n % 2 == 0 else (got[:, n // 2, 1] != 0).all()
    # float32 sums of 16 values of magnitude 10: rounding of some 1e-5 relative to the largest
    torch.testing.assert_close(torch.from_numpy(got), torch.view_as_real(torch.fft.rfft(x)), rtol=1e-5, atol=1e-3)


def test_complex_values_transposed_permuted_and_squeezed():
    def f(x):
        z = torch.view_as_complex(x)  # (2, 1, 3, 4) complex
        return torch.view_as_real(z.transpose(0, 2).permute(2, 0, 1, 3).squeeze(2))

    export_and_compare(Lambda(f), (torch.randn(2, 1, 3, 4, 2),), rtol=1e-5, atol=1e-6)


def test_a_failing_decomposition_is_a_conversion_error(monkeypatch):
    def broken(self, node):
        raise AssertionError("fake mode mismatch")

    monkeypatch.setattr(fastonnx.lowering.decompose.Decomposer, "_trace", broken)
    expected = (
        r"decomposition of aten::hann_window \(FX node `hann_window`\) failed: AssertionError: fake mode mismatch"
    )
    with pytest.raises(fastonnx.ConversionError, match=expected) as info:
        fastonnx.export(KronWindow(), (torch.randn(3, 8),))
    assert isinstance(info.value.__cause__, AssertionError)
    assert "in forward" in str(info.value)


def test_an_unexpected_failure_is_an_internal_error(monkeypatch):
    def broken(self, advance=None):
        raise KeyError("a bug")

    monkeypatch.setattr(_lower.Lowering, "convert_nodes", broken)
    with pytest.raises(fastonnx.InternalError, match="failed unexpectedly: KeyError") as info:
        fastonnx.export(TwoInTwoOut(), two_in_two_out_args())
    assert isinstance(info.value.__cause__, KeyError)


def test_outer_of_mixed_dtypes():
    """torch.outer promotes mixed dtypes (float32 and int64 multiply in float32), as ONNX's Mul
    does not; found by PyTorch's own ONNX tests."""
    from support import Lambda2

    export_and_compare(Lambda2(torch.outer), (torch.randn(3), torch.arange(4)))


def test_torch_errors_keep_their_types_beside_fastonnx():
    """fastonnx's translation of its native errors is its module's own: pybind11 shares the
    translators registered globally among extensions built against the same internals (torch
    2.14.1's are), and torch's own C++ errors then reached Python as fastonnx.InternalError, among
    them the NotImplementedError torch catches to decompose an op without a fake kernel."""
    with pytest.raises(RuntimeError) as info:
        torch._C.parse_schema("not a schema (")
    assert not isinstance(info.value, fastonnx.ExportError)

    class FakeQuantize(torch.nn.Module):
        def forward(self, x):
            return torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -128, 127)

    export_and_compare(FakeQuantize(), (torch.randn(6, 4),))

