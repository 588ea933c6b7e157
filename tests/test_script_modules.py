"""ScriptModules as torch.onnx's TorchScript exporter takes them: dynamic axes honoured as for
traced modules (a ``torch.jit.ScriptModule`` subclass with ``script_method`` too), inputs of every
type TorchScript gives a graph, each file run in onnxruntime at other sizes on every dynamic axis
against eager."""

from __future__ import annotations

import copy
import warnings
from typing import List, Optional, Tuple

import numpy as np
import pytest
import torch
from support import flat_tensors, run_ort

import fastonnx
from fastonnx import DynamicAxesWarning


def _export(model, args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fastonnx.export(model, args, **kwargs)
    fixed = [str(w.message) for w in caught if issubclass(w.category, DynamicAxesWarning)]
    return result, fixed


def _declared(result) -> list[list]:
    return [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in result.model_proto.graph.input]


def _assert_runs_as_eager(result, model, *calls):
    """Each call's outputs in onnxruntime as eager's; a None (an empty optional) as None, a
    sequence as its items (eager's list, whose ints are 0-d tensors there)."""
    for args in calls:
        copies = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        want = model(*copies)
        got = [x for out in run_ort(result.model_proto, flat_tensors(args)) for x in _items(out)]
        leaves = torch.utils._pytree.tree_leaves(want, is_leaf=lambda x: x is None)
        want = [torch.tensor(x) if type(x) is int else x for x in leaves]
        want = [x for x in want if x is None or isinstance(x, torch.Tensor)]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            if g is None or w is None:
                assert g is None and w is None
                continue
            assert g.shape == tuple(w.shape)
            assert g.dtype == w.detach().numpy().dtype
            np.testing.assert_allclose(g, w.detach().numpy(), rtol=1e-4, atol=1e-5)


def _items(output) -> list:
    return output if isinstance(output, list) else [output]


class LenOfRows(torch.jit.ScriptModule):
    """A ScriptModule subclass: Python's signature of a ``script_method`` keeps ``self``, which
    bound the first input and so ignored its dynamic_axes (torch's suite, test_len)."""

    @torch.jit.script_method
    def forward(self, input):
        return len(input.unbind()) + input


class TransposedConv(torch.jit.ScriptModule):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 1, 3, stride=2)

    @torch.jit.script_method
    def forward(self, x):
        return self.conv(x).transpose(0, 1)


def test_a_script_method_modules_dynamic_axes_are_honoured():
    model = LenOfRows()
    result, fixed = _export(model, (torch.randn(4, 5),), input_names=["input"], dynamic_axes={"input": {0: "seq"}})
    assert not fixed and _declared(result) == [["seq", 5]]
    _assert_runs_as_eager(result, model, (torch.randn(4, 5),), (torch.randn(7, 5),), (torch.randn(1, 5),))

    model = TransposedConv()
    result, fixed = _export(model, (torch.randn(4, 3, 16, 16),), dynamic_axes={"x": [0, 2]})
    assert not fixed and _declared(result) == [["x_dynamic_axes_1", 3, "x_dynamic_axes_2", 16]]
    _assert_runs_as_eager(result, model, (torch.randn(2, 3, 9, 16),))


def test_dynamic_shapes_of_a_script_method_module():
    model = LenOfRows()
    batch = torch.export.Dim("batch")
    result, fixed = _export(model, (torch.randn(4, 5),), dynamic_shapes={"input": {0: batch}})
    assert not fixed and _declared(result) == [["batch", 5]]
    _assert_runs_as_eager(result, model, (torch.randn(9, 5),))


class WritesFromASize(torch.nn.Module):
    def forward(self, x):
        x[:, x.size(0) :] = 0
        return x


def test_a_view_at_an_offset_made_of_a_size_keeps_the_size_dynamic():
    """A slice starting at ``x.size(0)`` has a storage offset made of that size: checked against
    the example's offset it fixed the axis (torch's suite, test_dynamic_expand_as)."""
    model = torch.jit.script(WritesFromASize())
    result, fixed = _export(model, (torch.ones(2, 5),), dynamic_axes={"x": [0, 1]})
    assert not fixed and _declared(result) == [["x_dynamic_axes_1", "x_dynamic_axes_2"]]
    _assert_runs_as_eager(result, model, (torch.randn(3, 4),), (torch.randn(2, 7),))


class SetsToAnother(torch.nn.Module):
    def forward(self, x, y):
        x.set_(y)
        return x


def test_set_gives_the_shape_eager_gives():
    """``x.set_(y)`` makes ``x`` ``y``: neither the export's eager run nor the translation may
    change the declared shape of ``x`` to ``y``'s (torch's suite, test_set_)."""
    model = torch.jit.script(SetsToAnother())
    x, y = torch.ones(2, 3), torch.randn(4, 6)
    result, fixed = _export(model, (x, y), input_names=["x", "y"], dynamic_axes={"x": [0, 1], "y": [0, 1]})
    assert not fixed
    assert _declared(result) == [["x_dynamic_axes_1", "x_dynamic_axes_2"], ["y_dynamic_axes_1", "y_dynamic_axes_2"]]
    assert x.shape == (2, 3)  # the example is left as given
    _assert_runs_as_eager(result, model, (x, y), (torch.ones(3, 1), torch.randn(5, 2)))


class Unbinds(torch.nn.Module):
    def forward(self, x):
        rows = x.unbind()
        return rows[0] + len(rows)


def test_an_axis_the_scripted_graph_fixes_is_in_the_warning_with_its_line():
    model = torch.jit.script(Unbinds())
    result, fixed = _export(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert len(fixed) == 1
    assert "input `x` axis 0 ('n'): fixed to 3 aten::unbind" in fixed[0] and "test_script_modules.py" in fixed[0]
    assert _declared(result) == [[3, 4]]
    _assert_runs_as_eager(result, model, (torch.randn(3, 4),))


@pytest.mark.parametrize("dynamic", [True, False])
def test_a_script_module_with_a_dynamic_axis_at_size_one(dynamic):
    model = LenOfRows()
    axes = {"input": {0: "seq"}} if dynamic else None
    result, fixed = _export(model, (torch.randn(1, 5),), dynamic_axes=axes)
    assert not fixed
    _assert_runs_as_eager(result, model, *([(torch.randn(1, 5),), (torch.randn(6, 5),)] if dynamic else []))


# -- inputs of every type TorchScript gives a graph ----------------------------------------------


class TakesEveryKind(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(
        self,
        x,
        xs: List[torch.Tensor],
        given: Optional[torch.Tensor],
        absent: Optional[torch.Tensor],
        pair: Tuple[torch.Tensor, torch.Tensor],
        n: int,
        scale: float,
        flag: bool,
    ):
        y = self.fc(x) + xs[0] + len(xs)
        if given is not None:
            y = y + given
        if absent is not None:
            y = y * absent
        if flag:
            y = y * scale
        return y + n + pair[1], None, xs[1] * 2


def _every_kind(rows: int, other: int) -> tuple:
    return (
        torch.randn(rows, 3),
        [torch.randn(rows, 3), torch.randn(other, 3)],
        torch.randn(rows, 3),
        None,
        (torch.randn(2, 3), torch.randn(rows, 3)),
        2,
        1.5,
        True,
    )


def test_lists_tuples_optionals_and_numbers_as_inputs():
    """A list or tuple of tensors is one input per tensor, named as a traced module's; None and
    numbers are constants of the file; a None output is an empty optional, as the TorchScript
    exporter returns it. Each dynamic axis keyed by the flattened input's name (torch's suite:
    test_arithmetic_prim_bool, test_list_pass, test_tuple_with_none_outputs...)."""
    model = torch.jit.script(TakesEveryKind().eval())
    axes = {"x": {0: "n"}, "xs_0": {0: "n"}, "xs_1": {0: "m"}, "given": {0: "n"}, "pair_1": {0: "n"}}
    result, fixed = _export(model, _every_kind(4, 2), dynamic_axes=axes)
    assert not fixed
    assert result.input_names == ["x", "xs_0", "xs_1", "given", "pair_0", "pair_1"]
    assert _declared(result) == [["n", 3], ["n", 3], ["m", 3], ["n", 3], [2, 3], ["n", 3]]
    outputs = result.model_proto.graph.output
    assert len(outputs) == 3 and outputs[1].type.HasField("optional_type")
    _assert_runs_as_eager(result, model, _every_kind(4, 2), _every_kind(7, 1), _every_kind(1, 5))
    assert all(d.ok for d in result.verify(*_every_kind(5, 3)))


def test_an_argument_a_script_module_cannot_take_blames_the_input():
    """Eager refuses it too: the error blames the input with eager's message."""
    model = torch.jit.script(TakesEveryKind())
    args = list(_every_kind(2, 2))
    args[1] = {"a": torch.randn(2, 3)}
    match = r"(?s)do not run in the model itself.*Expected a value of type 'List\[Tensor\]' for argument 'xs'"
    with pytest.raises(fastonnx.ArgumentError, match=match):
        fastonnx.export(model, tuple(args))


class Broadcasts(torch.nn.Module):
    def forward(self, x, y):
        return torch.broadcast_tensors(x, y)


def test_a_returned_list_is_flattened_as_eager_returns_it():
    """The scripted graph returns one list value where eager's result flattens to two tensors
    (a StopIteration escaped as an InternalError: torch's suite, test_broad_cast_tensors)."""
    model = torch.jit.script(Broadcasts())
    x, y = torch.randint(5, (1,)), torch.randint(5, (5,))
    result, _ = _export(model, (x, y), dynamic_axes={"y": {0: "n"}})
    assert len(result.model_proto.graph.output) == 2
    _assert_runs_as_eager(result, model, (x, y), (x, torch.randint(5, (8,))))




class ReshapesTo(torch.nn.Module):
    def forward(self, x, size: Tuple[int, int], view: List[int]):
        return x.reshape(size[0], size[1]) * 2, x.view(view)


def test_lists_and_tuples_of_numbers_are_constants():
    model = torch.jit.script(ReshapesTo())
    args = (torch.randn(2, 3), (3, 2), [6])
    result, _ = _export(model, args)
    assert result.input_names == ["x"]
    _assert_runs_as_eager(result, model, args)


class OptionalByDefault(torch.nn.Module):
    def forward(self, x, y: Optional[torch.Tensor] = None):
        if y is None:
            return x + 1
        return x + y


def test_an_optional_left_to_its_default_none():
    model = torch.jit.script(OptionalByDefault())
    result, fixed = _export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})
    assert not fixed and result.input_names == ["x"]
    _assert_runs_as_eager(result, model, (torch.randn(2, 3),), (torch.randn(5, 3),))


# -- scripted lists ------------------------------------------------------------------------------


class AppendsRows(torch.nn.Module):
    def forward(self, x, y):
        res = []
        for i in range(x.size(0)):
            res.append(torch.matmul(x[i], y))
        return res


class ExtendsRows(torch.nn.Module):
    def forward(self, x, y):
        res: List[torch.Tensor] = []
        for i in range(x.size(0)):
            res += [torch.matmul(x[i], y)]
        res.extend([y])
        return res + [x]


class SlicesAndWrites(torch.nn.Module):
    def forward(self, x):
        a = [x, x + 1, x * 2, x - 3]
        b = a[1:3]
        b[0] = b[0] * 5
        c = list(b)
        return c[0] + c[1]


class TensorOfSizes(torch.nn.Module):
    def forward(self, x):
        return torch.tensor([x.size(0), x.size(1)]) + 1, torch.tensor([[1.5], [float(x.size(1))]])


class PopsDeletesInserts(torch.nn.Module):
    def forward(self, x, y):
        res = [torch.matmul(x[i], y) for i in range(x.size(0))]
        elem = res.pop()
        del res[0]
        res.insert(1, elem * 2)
        return res, res.pop(0)


class WritesAtAComputedPosition(torch.nn.Module):
    def forward(self, x, y):
        res = list(x.unbind(0))
        res[y] = x[y] * 3
        return res


class ArangeOut(torch.nn.Module):
    def forward(self, end):
        out_t = torch.tensor([1], dtype=torch.float)
        return torch.arange(end, out=out_t)


@pytest.mark.parametrize(
    "cls, args",
    [
        (AppendsRows, (torch.randn(3, 4, 5), torch.randn(5, 2))),
        (ExtendsRows, (torch.randn(3, 4, 5), torch.randn(5, 2))),
        (SlicesAndWrites, (torch.randn(2, 3),)),
        (PopsDeletesInserts, (torch.randn(4, 3, 4), torch.randn(4, 5))),
        (ArangeOut, (torch.tensor(8.5),)),
    ],
)
def test_list_builtins_on_scripted_lists(cls, args):
    """torch's list ops take TorchScript's typed lists, not the Python list the translation holds
    ("Expected a value of type 'List[t]'": torch's suite, test_list_append_in_block,
    test_arange_out)."""
    model = torch.jit.script(cls())
    result, _ = _export(model, args)
    _assert_runs_as_eager(result, model, args)


def test_a_write_into_a_list_at_a_position_the_graph_computes():
    """``res[y] = v`` with ``y`` a tensor input: each item is ``v`` where ``y`` (from the end when
    negative) is its position (torch's suite, test_list_set)."""
    model = torch.jit.script(WritesAtAComputedPosition())
    x = torch.randn(4, 3)
    result, fixed = _export(model, (x, torch.tensor(2)), dynamic_axes={"x": {1: "m"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (x, torch.tensor(2)), (torch.randn(4, 6), torch.tensor(-1)))


def test_a_tensor_of_sizes_stays_dynamic():
    model = torch.jit.script(TensorOfSizes())
    result, fixed = _export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "n", 1: "m"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(2, 3),), (torch.randn(5, 7),))



class ToListAndBack(torch.nn.Module):
    def forward(self, x):
        res: List[int] = x.tolist()
        return torch.tensor(res) + 1


def test_tolist_reads_the_numbers_of_the_data():
    model = torch.jit.script(ToListAndBack())
    result, _ = _export(model, (torch.tensor([1, 2, 3]),))
    _assert_runs_as_eager(result, model, (torch.tensor([1, 2, 3]),), (torch.tensor([7, -4, 0]),))



class ReadsAtAComputedPosition(torch.nn.Module):
    def forward(self, x):
        columns = x.unbind(1)
        return columns[x.size(0) - 1]


def test_a_list_of_tensors_read_at_a_computed_position():
    model = torch.jit.script(ReadsAtAComputedPosition())
    result, fixed = _export(model, (torch.randn(2, 4),), dynamic_axes={"x": {0: "n"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(2, 4),), (torch.randn(4, 4),), (torch.randn(1, 4),))


def test_appending_in_a_loop_of_a_dynamic_count_makes_an_onnx_sequence():
    """A list a loop over a dynamic size appends to: an ONNX sequence the Loop carries, returned
    as one output holding as many items as the size at each call (torch's suite:
    test_inplace_sequence_with_loop); at a static size the loop is unrolled into a list as before."""
    model = torch.jit.script(AppendsRows())
    args = (torch.randn(3, 4, 5), torch.randn(5, 2))
    result, fixed = _export(model, args, dynamic_axes={"x": {0: "n"}})
    assert not fixed
    outputs = result.model_proto.graph.output
    assert [o.type.WhichOneof("value") for o in outputs] == ["sequence_type"]
    assert outputs[0].type.sequence_type.elem_type.tensor_type.elem_type == 1
    others = ((torch.randn(1, 4, 5), args[1]), (torch.randn(6, 4, 5), args[1]))
    _assert_runs_as_eager(result, model, args, *others)
    static, _ = _export(model, args)
    assert [o.type.WhichOneof("value") for o in static.model_proto.graph.output] == ["tensor_type"] * 3


class CollectsTokens(torch.nn.Module):
    def forward(self, x):
        tokens: List[torch.Tensor] = []
        done = torch.zeros(x.size(0), dtype=torch.bool)
        step = 0
        while step < x.size(1):
            for i in range(x.size(0)):
                if done[i]:
                    continue
                count = 0
                for token in x[i, step]:
                    tokens.append(token)
                    count += 1
                    if count == 2:
                        break
                done[i] = len(tokens) > 5
            step += 1
        return tokens, done


def test_nested_loops_appending_to_a_list_and_writing_into_a_tensor_made_outside_them():
    """Loops within loops (one with ``break``, one ``while``) that append to a list and write
    into a tensor made before them: each Loop carries the sequence and the tensor (torch's suite:
    test_inplace_sequence_with_loop)."""
    model = torch.jit.script(CollectsTokens())
    x = torch.randn(3, 4, 5)
    result, fixed = _export(model, (x,), dynamic_axes={"x": {0: "n", 1: "steps"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (x,), (torch.randn(1, 2, 5),), (torch.randn(6, 3, 5),))


class ReadsASequence(torch.nn.Module):
    def forward(self, x):
        rows: List[torch.Tensor] = []
        sizes: List[int] = []
        for i in range(x.size(0)):
            rows.append(x[i] * i)
            sizes.append(i * 2)
        return torch.stack(rows, 1) + len(rows), torch.cat(rows) * sizes[-1], rows[-1] + rows[0]


def test_a_sequence_read_by_len_an_index_stack_and_cat():
    model = torch.jit.script(ReadsASequence())
    result, fixed = _export(model, (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(3, 4),), (torch.randn(1, 4),), (torch.randn(6, 4),))


class PopsASequence(torch.nn.Module):
    def forward(self, x):
        rows: List[torch.Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i])
        rows.pop()
        return rows


class UnpacksASequence(torch.nn.Module):
    def forward(self, x):
        rows: List[torch.Tensor] = []
        for i in range(x.size(0)):
            rows.append(x[i])
        a, b = rows
        return a + b


class AppendsToANestedList(torch.nn.Module):
    def forward(self, x):
        rows: List[torch.Tensor] = [x[0]]
        outer = [rows]
        for i in range(x.size(0)):
            rows.append(x[i])
        outer.append(rows)
        return torch.stack(outer[0])


def test_a_loop_appending_to_a_list_another_list_holds_is_an_error():
    """The sequence is what the list's own name reads from the loop on; the outer list would keep
    the items it had (a stack of one row where eager stacks them all)."""
    match = r"(?s)appends to a list that another list or name holds too.*from File .*test_script_modules.py"
    with pytest.raises(fastonnx.ConversionError, match=match):
        fastonnx.export(torch.jit.script(AppendsToANestedList()), (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})


@pytest.mark.parametrize(
    "cls, what, where",
    [
        (PopsASequence, "aten::pop", r"node: .*aten::pop.*from File .*test_script_modules.py"),
        (UnpacksASequence, "`prim::ListUnpack`", r"node: .*prim::ListUnpack"),  # (TorchScript gives it no line)
    ],
)
def test_what_reads_a_sequence_otherwise_is_an_error_naming_the_node(cls, what, where):
    match = rf"(?s){what} reads a scripted list whose length the graph computes.*{where}"
    with pytest.raises(fastonnx.ConversionError, match=match):
        fastonnx.export(torch.jit.script(cls()), (torch.randn(2, 4),), dynamic_axes={"x": {0: "n"}})


# -- numbers, layouts and devices ----------------------------------------------------------------


class ExpandsToACount(torch.nn.Module):
    def forward(self, x, n):
        return x.expand(n, x.size(1))


def test_an_implicit_int_of_data_stays_a_value_of_the_graph():
    """``aten::IntImplicit`` of a tensor input read as a number of the graph, not guarded on
    ("could not extract specialized integer": torch's suite, test_expand)."""
    model = torch.jit.script(ExpandsToACount())
    result, _ = _export(model, (torch.randn(1, 3), torch.tensor(4)), dynamic_axes={"x": {1: "m"}})
    _assert_runs_as_eager(
        result, model, (torch.randn(1, 3), torch.tensor(4)), (torch.randn(1, 5), torch.tensor(2))
    )


class EnumeratesAndBounds(torch.nn.Module):
    def forward(self, x):
        out = x[:, 0]
        for i, row in enumerate([x, x * 2, x + 1]):
            out = out + row[:, 1] * i
        return out * min(x.size(0), x.size(1)) + max([x.size(1), 3])


def test_min_and_max_of_numbers_and_of_a_list_follow_the_sizes():
    """``prim::min`` (which ``enumerate`` makes) and ``prim::max`` on sizes (torch's suite,
    test_prim_min)."""
    model = torch.jit.script(EnumeratesAndBounds())
    result, fixed = _export(model, (torch.randn(4, 2),), dynamic_axes={"x": {0: "n", 1: "m"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(4, 2),), (torch.randn(2, 5),), (torch.randn(6, 6),))


class ZerosLike(torch.nn.Module):
    def forward(self, x):
        zeros = torch.zeros(x.shape, layout=x.layout, device=x.device, dtype=x.dtype)
        return zeros + x, torch.norm(x, p="fro", dim=(0, 1), keepdim=True)


def test_layout_device_and_device_type_are_constants():
    """``prim::layout``, ``prim::device`` and ``prim::type`` (a device's type) as the constants they
    are in the translation (torch's suite, test_frobenius_norm)."""
    model = torch.jit.script(ZerosLike())
    result, fixed = _export(model, (torch.randn(2, 3),), dynamic_axes={"x": {0: "n"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(2, 3),), (torch.randn(6, 3),))


class FailsOnTheExample(torch.nn.Module):
    def forward(self, x, size):
        return x.expand(size)


def test_a_script_module_failing_on_the_example_blames_the_input():
    match = "(?s)do not run in the model itself.*Cannot input a tensor of dimension other than 0"
    with pytest.raises(fastonnx.ArgumentError, match=match):
        fastonnx.export(torch.jit.script(FailsOnTheExample()), (torch.randn(1, 3), torch.tensor([4, 3])))


class Accumulates(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.ones(3))

    def forward(self, x):
        self.acc.add_(x.sum(0))
        return self.acc * 2


def test_the_weights_written_are_the_modules_before_the_export():
    """The export runs the ScriptModule eagerly (for its outputs' structure); a forward that
    writes into its module's state must not change the weights the file holds."""
    model = torch.jit.script(Accumulates())
    x = torch.randn(4, 3)
    result, _ = _export(model, (x,))
    assert torch.equal(model.acc, torch.ones(3))
    (got,) = run_ort(result.model_proto, [x])
    np.testing.assert_allclose(got, ((torch.ones(3) + x.sum(0)) * 2).numpy(), rtol=1e-5)


# -- module attributes the forward sets ----------------------------------------------------------


class SumsRowsIntoAnAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.total = torch.ones(3)
        self.fc = torch.nn.Linear(3, 3)
        self.offset = 2

    def forward(self, x):
        for i in range(x.size(0)):
            self.total = self.total + x[i]
        return self.fc(self.total) + self.offset


class AddsRowsIntoABuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.ones(3))

    def forward(self, x):
        for i in range(x.size(0)):
            self.acc += x[i]
        if x.size(0) > 2:
            self.acc = self.acc * 2
        return self.acc - 1


class CopiesIntoAnAttributeInALoop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = torch.arange(3.0)
        self.count = 0

    def forward(self, x):
        self.count = x.size(1)
        self.bias = torch.arange(3.0)
        for i in range(x.size(0)):
            self.bias.copy_(self.bias + x[i])
            self.bias[1:] = self.bias[1:] * 2
        return self.bias * self.count


@pytest.mark.parametrize("cls", [SumsRowsIntoAnAttribute, AddsRowsIntoABuffer, CopiesIntoAnAttributeInALoop])
@pytest.mark.parametrize("dynamic", [True, False])
def test_attributes_set_in_loops_and_branches_are_values_of_the_graph(cls, dynamic):
    """``prim::CreateObject``, ``GetAttr``/``SetAttr`` on the module: an attribute set in a loop
    is a loop-carried value, its value before the export the loop's start (torch's suite,
    test_inplace_attr_with_loop)."""
    model = torch.jit.script(cls().eval())
    before = copy.deepcopy(model)
    result, fixed = _export(model, (torch.randn(4, 3),), dynamic_axes={"x": {0: "n"}} if dynamic else None)
    assert not fixed
    calls = [(torch.randn(4, 3),)] + ([(torch.randn(2, 3),), (torch.randn(7, 3),)] if dynamic else [])
    for args in calls:
        _assert_runs_as_eager(result, copy.deepcopy(before), args)



class WritesIntoACopyOfAConstant(torch.nn.Module):
    def forward(self, x):
        boxes = torch.ones(2, 3).clone()
        boxes[:, 1:] = x.sum(0, keepdim=True)
        return boxes + x[:1, :1]


def test_a_write_through_a_view_into_a_copy_of_a_constant():
    """``b = c.clone(); b[:, 1:] = v`` with ``c`` a constant of the graph: the write was traced
    in place on the constant's copy and lost (torch's suite, test_set_attr_3)."""
    model = torch.jit.script(WritesIntoACopyOfAConstant())
    result, fixed = _export(model, (torch.randn(4, 2),), dynamic_axes={"x": {0: "n"}})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(4, 2),), (torch.randn(7, 2),))


class LstmWithZeroState(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 5, 1)

    def forward(self, x):
        batch = x.size()[1]
        h0 = x.new_zeros(1, batch, 5)
        c0 = x.new_zeros(1, batch, 5)
        return self.lstm(x, (h0, c0))


def test_a_check_of_sizes_lists_keeps_the_axes_dynamic():
    """The LSTM's scripted check ``hx.size() != expected`` compares lists of sizes: decided from
    the symbols, not by comparing the lists' FX nodes, which took the raising branch (torch's
    suite, test_lstm_post_fix_init_state)."""
    model = torch.jit.script(LstmWithZeroState().eval())
    result, fixed = _export(model, (torch.randn(3, 2, 4),), input_names=["x"], dynamic_axes={"x": {0: "seq", 1: "b"}})
    assert not fixed and _declared(result) == [["seq", "b", 4]]
    _assert_runs_as_eager(result, model, (torch.randn(3, 2, 4),), (torch.randn(6, 5, 4),))


class ChecksItsInput(torch.nn.Module):
    def forward(self, x):
        if x.size(0) > 8:
            raise ValueError("at most 8 rows")
        return x * 2


def test_a_branch_that_raises_is_the_other_branch():
    """ONNX raises nothing: an ``if`` one of whose branches raises is the other one, which every
    input eager takes takes."""
    model = torch.jit.script(ChecksItsInput())
    result, fixed = _export(model, (torch.randn(3, 2),), dynamic_axes={"x": {0: "n"}})
    assert not fixed and "If" not in {n.op_type for n in result.model_proto.graph.node}
    _assert_runs_as_eager(result, model, (torch.randn(3, 2),), (torch.randn(8, 2),))


# -- quantization parameters the graph computes --------------------------------------------------


class QuantizedConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.quant = torch.ao.quantization.QuantStub()
        self.conv = torch.nn.Conv2d(4, 2, 3, stride=2)
        self.dequant = torch.ao.quantization.DeQuantStub()

    def forward(self, x):
        return self.dequant(self.conv(self.quant(x)))


def test_a_quantize_stubs_scale_and_zero_point_read_from_its_buffers():
    """A converted QAT model scripted: ``quantize_per_tensor(x, float(self.scale),
    int(self.zero_point))`` reads its parameters from buffers, QuantizeLinear's tensor inputs
    (torch's suite, test_qat_conv2d)."""
    torch.manual_seed(0)
    model = QuantizedConv()
    model.qconfig = torch.ao.quantization.get_default_qat_qconfig("fbgemm")
    model = torch.ao.quantization.prepare_qat(model.train())
    x = torch.randn(4, 4, 8, 8)
    model(x)
    model = torch.jit.script(torch.ao.quantization.convert(model.eval()))
    result, fixed = _export(model, (x,), dynamic_axes={"x": {0: "n"}})
    assert not fixed
    assert "QuantizeLinear" in {n.op_type for n in result.model_proto.graph.node}
    _assert_runs_as_eager(result, model, (x,), (torch.randn(2, 4, 8, 8),))


# -- what torch's scripting suite takes besides (print, x.data, casts to a device, masks...) -------


class PrintsWarnsAndCasts(torch.nn.Module):
    def forward(self, x, y, keep):
        print(f"rows: {x.size(0)}", x)
        if x.size(0) > 100:
            warnings.warn("many rows", stacklevel=2)
        mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
        picked = x.data[:, mask]
        start = torch.arange(0.5, 6.0, 1.5)
        return picked.to(y.device), x.to(y.device, dtype=torch.long), start, torch.where(keep, x, -x)


def test_print_warn_data_device_casts_masks_and_float_aranges():
    """print and warnings.warn are dropped with the strings they format, as the TorchScript
    exporter drops them; ``x.data`` is x; ``x.to(device, dtype)`` a cast; a uint8 mask a bool one;
    a uint8 condition of ``where`` too; an arange of floats keeps no ``layout=None`` PrimTorch
    refuses (torch's suite: test_kldiv_loss, test_print_tensor_within_torch_nn_module, test_data,
    test_to_device, test_index_mask, test_where_with_byte_tensor, test_arange_with_floats_override)."""
    model = torch.jit.script(PrintsWarnsAndCasts())

    def call(n: int, m: int) -> tuple:
        return (torch.randn(n, 3) * 10, torch.randn(m), torch.randint(0, 2, (n, 3), dtype=torch.uint8))

    result, fixed = _export(model, call(4, 2), dynamic_axes={"x": {0: "n"}, "y": {0: "m"}, "keep": {0: "n"}})
    assert not fixed
    _assert_runs_as_eager(result, model, call(4, 2), call(7, 5))


class BranchesOnTypesAndData(torch.nn.Module):
    def forward(self, x, y, cond):
        res: List[torch.Tensor] = []
        if cond:
            res = res + [x]
        else:
            res = res + [y]
        ready = True
        if x.sum() > -1000:
            ready = False
        if ready:
            x = x * 2
        if x.is_floating_point():
            return res, x + 1
        return res, x


def test_if_returning_lists_numbers_of_data_and_dtype_tests():
    """An ``if`` whose branches both return a list of one length returns its items; a number an
    ``if`` on data sets is a value of the graph; ``is_floating_point()`` is decided when exporting
    (torch's suite: test_if_list, test_fuse_conv_in_block, test_floating_point_infer_dtype)."""
    model = torch.jit.script(BranchesOnTypesAndData())
    args = (torch.randn(2, 3), torch.randn(3, 3), torch.tensor(True))
    result, fixed = _export(model, args, dynamic_axes={"x": {0: "n"}, "y": {0: "m"}})
    assert not fixed
    other = (torch.randn(5, 3) - 2000, torch.randn(1, 3), torch.tensor(False))
    _assert_runs_as_eager(result, model, args, other, (torch.randn(5, 3), torch.randn(4, 3), torch.tensor(False)))


class ZerosOfSomeSizes(torch.nn.Module):
    def forward(self, x):
        return x.new_zeros(x.shape[1 : x.size(2)]) + x.size(0)


def test_a_list_sliced_at_a_size_fixes_the_axis_with_its_line():
    """The slice's length is a rank of the graph: the size is taken at the example's value and
    the axis listed as static, with its line (torch's suite: test_slice_dynamic_shape_script)."""
    model = torch.jit.script(ZerosOfSomeSizes())
    x = torch.rand(1, 2, 3, 4)
    result, fixed = _export(model, (x,), dynamic_axes={"x": [0, 1, 2, 3]})
    assert len(fixed) == 1 and "aten::slice made it 3" in fixed[0] and "test_script_modules.py" in fixed[0]
    assert _declared(result) == [["x_dynamic_axes_1", "x_dynamic_axes_2", 3, "x_dynamic_axes_4"]]
    _assert_runs_as_eager(result, model, (x,), (torch.rand(5, 4, 3, 2),))


class PadsAndResizes(torch.nn.Module):
    def forward(self, x, y, pad: List[int]):
        out = torch.nn.functional.interpolate(x, mode="nearest", size=(int(y.size(0)), int(y.size(1))))
        return torch.nn.functional.pad(x, pad), out


def test_numbers_given_as_tensors_and_upsampling_to_sizes():
    """A ``List[int]`` given 0-d tensors reads them from its inputs; an upsample to sizes of a
    dynamic input follows them (torch's suite: test_pad_types, test_interpolate_no_shape). (A pad
    of amounts read from data fixes the batch of what it pads: x's axes stay static here.)"""
    model = torch.jit.script(PadsAndResizes())

    def call(n: int, h: int, w: int, pads: tuple) -> tuple:
        return (torch.randn(n, 2, 4, 4), torch.randn(h, w), [torch.tensor(p) for p in pads])

    result, fixed = _export(model, call(1, 16, 16, (2, 4)), dynamic_axes={"y": [0, 1]})
    assert not fixed and result.input_names == ["x", "y", "pad_0", "pad_1"]
    _assert_runs_as_eager(result, model, call(1, 16, 16, (2, 4)), call(1, 5, 9, (0, 1)))


_ONES = torch.ones(2, 3)


class WithDefaults(torch.nn.Module):
    def forward(
        self,
        x,
        y: Optional[torch.Tensor] = _ONES,
        pair: Tuple[Optional[torch.Tensor], Optional[torch.Tensor]] = (None, None),
    ):
        a, b = pair
        if a is not None:
            x = x + a
        if b is not None:
            x = x * b
        if y is not None:
            x = x - y
        return x


def test_keyword_inputs_defaults_and_tuples_holding_none():
    """Keyword inputs bound by name; a default the call does not give a constant (eager takes
    it); a tuple holding None (or a number) an input per tensor (torch's suite:
    test_mixed_optional_default_tensor_script, test_tuple_of_optional_default_tensor_script,
    test_tuple_primitive_input)."""
    model = torch.jit.script(WithDefaults())
    x, b = torch.randn(2, 3), torch.randn(2, 3)
    result, _ = _export(model, (x,), kwargs={"pair": (None, b)}, dynamic_axes={"x": {0: "n"}, "pair_1": {0: "n"}})
    assert result.input_names == ["x", "pair_1"]
    got = run_ort(result.model_proto, [x, b])
    np.testing.assert_allclose(got[0], model(x, pair=(None, b)).numpy(), rtol=1e-5)
    with pytest.raises(fastonnx.TraceError, match="in the order of its parameters"):
        fastonnx.export(model, (x,), kwargs={"pair": (None, b), "y": x})


class TrainsNorms(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, bias=False)
        self.bn = torch.nn.BatchNorm2d(4)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        return self.relu(self.bn(self.relu(self.bn(self.conv(x)))))


def test_batch_norm_in_training_mode_with_in_place_ops():
    """The functionalized graph's functional batch norm is decomposed by torch's own table
    (torch's suite: test_multiple_conv_bn)."""
    model = TrainsNorms()
    x = torch.randn(2, 3, 8, 8)
    scripted = torch.jit.script(copy.deepcopy(model))
    training = torch.onnx.TrainingMode.TRAINING
    result, _ = _export(scripted, (x,), training=training, dynamic_axes={"x": {0: "n", 2: "h"}})
    for args in ((x,), (torch.randn(3, 3, 11, 8),)):
        want = copy.deepcopy(model).train()(*args).detach().numpy()
        np.testing.assert_allclose(run_ort(result.model_proto, list(args))[0], want, rtol=1e-3, atol=1e-4)


class PicksOfSeveralShapes(torch.nn.Module):
    def forward(self, x, y, z, ind):
        arr = [x, y, z]
        return arr[ind] * 2


def test_a_list_of_several_shapes_read_at_a_computed_position():
    """The tensor at the position, chosen by Ifs whose results' sizes are the graph's (torch's
    suite: test_getitem); a negative position counts from the end."""
    model = torch.jit.script(PicksOfSeveralShapes())
    args = (torch.randn(3, 4, 5), torch.randn(1, 4, 5), torch.randn(2, 4, 5), torch.tensor(1))
    result, fixed = _export(model, args, dynamic_axes={"x": {0: "a"}, "y": {0: "b"}, "z": {0: "c", 2: "d"}})
    assert not fixed
    other = (torch.randn(6, 4, 5), torch.randn(2, 4, 5), torch.randn(3, 4, 7))
    _assert_runs_as_eager(result, model, args, (*other, torch.tensor(-1)), (*other, torch.tensor(0)))


class ListsOfRows(torch.nn.Module):
    def forward(self, x):
        if x[0].shape[0] < 5:
            if x.size(0) == 1:
                x += x
            else:
                return list(x)
        return list(x)


class RowsOrThePair(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] < 5:
            if x.size(0) == 1:
                x = x + 4
            else:
                rows = list(x)
                rows.append(x)
                return rows
        return [x, x]


class CountsUpTo(torch.nn.Module):
    def forward(self, x):
        y = list(range(x.size(0)))
        if y[-1] < 5:
            y.append(10)
        return y


@pytest.mark.parametrize(
    "cls, x, others",
    [
        (ListsOfRows, torch.ones(3, 4), [torch.randn(5, 2), torch.randn(1, 7)]),
        (RowsOrThePair, torch.ones(3, 4, dtype=torch.int), [torch.ones(4, 6, dtype=torch.int)]),
        (CountsUpTo, torch.ones(3, 4), [torch.ones(6, 2), torch.ones(1, 1)]),
    ],
)
def test_lists_of_a_dynamic_length_through_ifs_are_onnx_sequences(cls, x, others):
    """A list of as many items as a dynamic size (``list(x)``, ``list(range(n))``): an ONNX
    sequence, which an ``if`` returns where a branch gives one, a list of a known length or one
    left uninitialized (an early ``return``) then a sequence too (torch's suite:
    test_uninitialized_tensorList_dynamic, ..._tensorList_shape, test_uninitialized_intList)."""
    model = torch.jit.script(cls())
    result, fixed = _export(model, (x,), dynamic_axes={"x": [0, 1]})
    assert not fixed
    assert [o.type.WhichOneof("value") for o in result.model_proto.graph.output] == ["sequence_type"]
    _assert_runs_as_eager(result, model, (x,), *((other,) for other in others))


class RankByBranch(torch.jit.ScriptModule):
    @torch.jit.script_method
    def forward(self, x):
        if x.size(0) > 1:
            if (x + 2).is_floating_point():
                return x.new_zeros(x.shape[1:])
            return x.new_zeros(x.shape)
        return x


class ReadsARankByBranch(torch.nn.Module):
    def forward(self, x):
        y = x
        if x.size(0) > 1:
            y = x.sum(0)
        return y + 1


def test_an_if_the_graph_returns_may_give_a_rank_of_each_branch():
    """An ``if`` whose branches give tensors of different ranks, returned by the graph and read by
    no op: an ONNX If whose result's rank is each branch's (declared with the example's, as the
    TorchScript exporter declares it; torch's suite: test_floating_point_infer_dtype); read by an op,
    whose result would depend on it, a ConversionError naming the line."""
    model = RankByBranch()
    result, fixed = _export(model, (torch.randn(2, 3, 4),), dynamic_axes={"x": [0, 1, 2]})
    assert not fixed
    _assert_runs_as_eager(result, model, (torch.randn(2, 3, 4),), (torch.randn(1, 3, 4),), (torch.randn(5, 2, 6),))
    match = r"(?s)different types or ranks.*from File .*test_script_modules.py"
    with pytest.raises(fastonnx.ConversionError, match=match):
        fastonnx.export(torch.jit.script(ReadsARankByBranch()), (torch.randn(3, 4),), dynamic_axes={"x": {0: "n"}})


class MayBeNone(torch.nn.Module):
    def forward(self, x, y):
        out: Optional[torch.Tensor] = None
        if x.size(0) > 2:
            out = x * 2
        twice: Optional[torch.Tensor] = x
        if y.sum() > 0:
            twice = None
        return out, twice, y, None


def test_values_that_may_be_none_are_onnx_optionals():
    """``y = None`` in one branch and a tensor in the other: an ONNX If returning an optional of
    the tensor's type and sizes (its branches too), None where eager gives None; a returned None
    an empty optional (torch's suite: test_optional_output, test_tuple_with_none_outputs)."""
    model = torch.jit.script(MayBeNone())
    args = (torch.randn(4, 3), torch.ones(2))
    result, fixed = _export(model, args, dynamic_axes={"x": {0: "n"}})
    assert not fixed
    outputs = result.model_proto.graph.output
    kinds = [o.type.WhichOneof("value") for o in outputs]
    assert kinds == ["optional_type", "optional_type", "tensor_type", "optional_type"]
    element = outputs[0].type.optional_type.elem_type.tensor_type
    assert element.elem_type == 1 and [d.dim_param or d.dim_value for d in element.shape.dim] == ["n", 3]
    others = ((torch.randn(1, 3), -torch.ones(2)), (torch.randn(7, 3), torch.ones(2)))
    _assert_runs_as_eager(result, model, args, *others)


class ReadsWhatMayBeNone(torch.nn.Module):
    def forward(self, x):
        y: Optional[torch.Tensor] = None
        if x.size(0) > 2:
            y = x
        if y is None:
            return x
        return y + 1


def test_reading_a_value_that_may_be_none_is_an_error_naming_the_line():
    model = torch.jit.script(ReadsWhatMayBeNone())
    match = r"(?s)may leave None.*from File .*test_script_modules.py"
    with pytest.raises(fastonnx.ConversionError, match=match):
        fastonnx.export(model, (torch.randn(4, 3),), dynamic_axes={"x": {0: "n"}})


class CarriesWhatMayBeNone(torch.nn.Module):
    def forward(self, x):
        first: Optional[torch.Tensor] = None
        last: Optional[torch.Tensor] = x
        for _ in range(x.size(0)):
            first = x * 2
            last = None
        return first, last


def test_a_loop_carries_values_that_may_be_none_as_onnx_optionals():
    """A value None at the start of a loop over a dynamic trip count, or made None in its body:
    a Loop carrying an optional of the tensor's type and sizes, None where eager gives None, traced
    at sizes 0 and 1 too (torch's suite: test_optional_output_LoopNoneInput, ..._LoopNoneOutput)."""
    model = torch.jit.script(CarriesWhatMayBeNone())
    for n in (0, 1, 3):
        result, fixed = _export(model, (torch.randn(n, 2),), dynamic_axes={"x": {0: "n"}})
        assert not fixed
        graph = result.model_proto.graph
        assert "Loop" in [node.op_type for node in graph.node]
        for output in graph.output:
            element = output.type.optional_type.elem_type.tensor_type
            assert element.elem_type == 1 and [d.dim_param or d.dim_value for d in element.shape.dim] == ["n", 2]
        _assert_runs_as_eager(result, model, *((torch.randn(m, 2),) for m in (n, 0, 1, 4)))


class ReadsWhatALoopMayLeaveNone(torch.nn.Module):
    def forward(self, x):
        y: Optional[torch.Tensor] = None
        for _ in range(x.size(0)):
            if y is None:
                y = x
            else:
                y = y + x
        return y


def test_a_loop_reading_a_value_that_may_be_none_is_an_error_naming_the_line():
    model = torch.jit.script(ReadsWhatALoopMayLeaveNone())
    match = r"(?s)may leave None.*from File .*test_script_modules.py"
    with pytest.raises(fastonnx.ConversionError, match=match):
        fastonnx.export(model, (torch.randn(4, 3),), dynamic_axes={"x": {0: "n"}})


class AppendsNothing(torch.nn.Module):
    def forward(self, x):
        res: List[torch.Tensor] = []
        for i in range(x.size(0)):
            if len(res) > 2:
                res.append(x[i])
        return res


def test_a_model_returning_only_empty_lists_returns_empty_sequences():
    """onnxruntime loads no graph without outputs: a forward whose result holds no tensor returns
    its empty lists as empty sequences, as the TorchScript exporter does (torch's suite:
    test_list_append_nested_2); beside a tensor an empty list is no output, as before."""
    model = torch.jit.script(AppendsNothing())
    result, _ = _export(model, (torch.randn(4, 3),))
    outputs = result.model_proto.graph.output
    assert [o.type.WhichOneof("value") for o in outputs] == ["sequence_type"]
    assert run_ort(result.model_proto, [torch.randn(4, 3)]) == [[]]
    _assert_runs_as_eager(result, model, (torch.randn(4, 3),))
