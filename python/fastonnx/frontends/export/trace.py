"""Tracing: nn.Module -> torch.export.ExportedProgram, functionalized only when it must be."""

from __future__ import annotations

import contextlib
import functools
import operator
import re
import sys
import traceback

import sympy
import torch
from torch._subclasses.functional_tensor import dispatch_functionalize
from torch.export import Dim, ExportedProgram
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.onnx import TrainingMode

from ...dynamic.narrowing import (
    narrowed,
    narrowing_now,
    tested_against_one,
    warn_narrowed,
    warn_tested_against_one,
)
from ...dynamic.request import Attempt, user_frame
from ...dynamic.small_sizes import (
    SmallSizeTested,
    Tests,
    domains_of,
    dynamic_small_sizes,
    judge,
    recording_size_tests,
    retracing,
    settle,
)
from ...errors import TraceError
from .fake_kernels import quick_fake_kernels
from .rnn import lstm_final_states_fixed, rnns_as_loops


@contextlib.contextmanager
def traced_in_mode(model: torch.nn.Module, training: TrainingMode):
    """Trace in the mode asked for (eval by default, as torch.onnx does) and restore the
    module's own afterwards."""
    modes = {m: m.training for m in model.modules()}
    if training == TrainingMode.EVAL:
        model.eval()
    elif training == TrainingMode.TRAINING:
        model.train()
    try:
        yield
    finally:
        for m, mode in modes.items():
            m.train(mode)


def trace_requested(
    model,
    args: tuple,
    kwargs: dict | None,
    attempt: Attempt,
    training: TrainingMode = TrainingMode.EVAL,
    dynamic_small: bool = True,
) -> ExportedProgram:
    """The program torch.export traces for the attempt's request (``attempt.fixed``, when not None,
    records where it fixed each symbolic size). With ``dynamic_small``, the requested axes whose
    example size is 0 or 1 are traced dynamic (see _small_sizes); one that the model does not let
    vary is traced again static (``Attempt.make_static`` says why), and when torch fails to trace
    them dynamic, all are. So is a requested axis a test of the model's code narrows (see
    dynamic.narrowing): one DynamicAxesWarning lists those of ``Dim.AUTO``."""
    if isinstance(model, ExportedProgram):
        return model
    narrowed_before = dict(attempt.narrowed)
    ep, tests = _trace_requested(model, args, kwargs, attempt, training, dynamic_small)
    # One warning for every axis a test of the model's code narrowed, after the traces that found them.
    warn_narrowed({a: why for a, why in attempt.narrowed.items() if a not in narrowed_before}, attempt.request)
    shape_env = ep_shape_env(ep)
    if shape_env is not None:
        warn_tested_against_one(tested_against_one(shape_env, tests, input_symbols(ep)), attempt.request)
    return ep


def _trace_requested(
    model, args: tuple, kwargs: dict | None, attempt: Attempt, training: TrainingMode, dynamic_small: bool
) -> tuple[ExportedProgram, Tests]:
    """The program, and what its trace recorded (see trace_requested)."""
    fixed = attempt.fixed
    # A trace stops at the first guard that makes a requested size static: a size traced at 0 or 1
    # (see SmallSizeTested), or one a test of the model's code narrows (see narrowing). It is traced
    # again static, without tracing the rest of the model first.
    stop_early = True
    while True:
        if fixed:  # (what a trace before recorded names symbols of its own)
            fixed.clear()
        small = attempt.small_axes() if dynamic_small else []
        loose = _loose_axes(attempt)
        tests = Tests(stop_early=stop_early, narrows=narrowing_now(frozenset(_size_source(attempt, *a) for a in loose)))
        try:
            ep = trace(model, args, kwargs, attempt.shapes, training, fixed, tests, small_sizes=bool(small))
        except TraceError as e:
            if not isinstance(innermost(e), SmallSizeTested):
                if not small:
                    raise
                # torch.export's own trace, which makes sizes of 0 and 1 static (and refuses them
                # where the request is strict, as before)
                if fixed:
                    fixed.clear()
                tests = Tests()
                ep = trace(model, args, kwargs, attempt.shapes, training, fixed, tests, small_sizes=False)
                lines = str(e).split(": ", 1)[-1].splitlines()
                where = [line.strip() for line in lines[1:2] if line.strip().startswith("at ")]
                why = f"(torch.export failed to trace it as a dynamic size: {' '.join(lines[:1] + where)})"
                for i, axis in small:
                    attempt.make_static(i, axis, why)
                if _made_static_where_narrowed(ep, tests, attempt, {}):
                    continue
                return ep, tests
        # Stopped: what judge() or narrowed() would say after the whole trace. (Also when torch
        # code caught the stop and traced on: that program is not the model's.)
        if tests.raised and (stopped := tests.stopped) is not None:
            requested = small if not stopped.narrowed else loose
            symbols = {
                a: s for a in requested if (s := _size_symbol(stopped.shape_env, attempt, *a)) in stopped.unsound
            }
            for (i, axis), symbol in symbols.items():
                attempt.make_static(i, axis, stopped.unsound[symbol])
                if symbol in stopped.scripted:
                    attempt.scripted.add((i, axis))
                if stopped.narrowed:
                    attempt.narrowed[(i, axis)] = stopped.unsound[symbol]
            stop_early = bool(symbols)  # (else none requested: the whole trace decides)
            continue
        if not small:
            if _made_static_where_narrowed(ep, tests, attempt, {}):
                continue
            return ep, tests
        shape_env = ep_shape_env(ep)
        assert shape_env is not None  # (the program has a dynamic input)
        verdict = judge(shape_env, tests)
        symbols = input_symbols(ep)
        unsound = [(i, axis) for i, axis in small if symbols.get((i, axis)) in verdict.unsound]
        if not unsound:
            if _made_static_where_narrowed(ep, tests, attempt, verdict.domains):
                continue
            settle(shape_env, ep.range_constraints, verdict.domains)
            return ep, tests
        for i, axis in unsound:
            attempt.make_static(i, axis, verdict.unsound[symbols[(i, axis)]])
            if symbols[(i, axis)] in verdict.scripted:
                attempt.scripted.add((i, axis))


def _loose_axes(attempt: Attempt) -> list[tuple[int, int]]:
    """The requested axes still dynamic that torch may narrow: ``Dim.AUTO`` (dynamic_axes too) and
    ``Dim.DYNAMIC``; torch.export refuses a guard a named ``Dim`` does not declare."""
    return [
        (i, axis)
        for i, axes in enumerate(attempt.axes)
        for axis, spec in axes.items()
        if spec is Dim.AUTO or spec is Dim.DYNAMIC
    ]


def _made_static_where_narrowed(ep: ExportedProgram, tests: Tests, attempt: Attempt, domains: dict) -> bool:
    """Makes static the requested axes that torch was free to narrow (``Dim.AUTO``,
    ``Dim.DYNAMIC``, dynamic_axes) and a test of the model's code did (see narrowing); whether
    there were any (the model is then traced again)."""
    shape_env = ep_shape_env(ep)
    loose = set(_loose_axes(attempt))
    every = input_symbols(ep)
    sizes = {a: e for a, e in every.items() if a in loose}
    if shape_env is None or not sizes:
        return False
    # (an input's size written in other inputs' sizes is a relation between them, not a narrowing)
    inputs = frozenset(e for e in every.values() if isinstance(e, sympy.Symbol))
    found, scripted = narrowed(shape_env, tests, sizes, domains, inputs)
    for (i, axis), why in found.items():
        attempt.make_static(i, axis, why)
    attempt.scripted |= scripted
    attempt.narrowed.update(found)
    return bool(found)


def _size_source(attempt: Attempt, i: int, axis: int) -> str:
    """torch's ShapeEnv's name of tensor input ``i``'s size at ``axis``: L['x'].size()[2]."""
    return f"{attempt.request.sources[i]}.size()[{axis}]"


def _size_symbol(shape_env: ShapeEnv, attempt: Attempt, i: int, axis: int):
    """The symbol of tensor input ``i``'s size at ``axis`` in a trace's ShapeEnv, or None."""
    wanted = _size_source(attempt, i, axis)
    return next((s for s, sources in shape_env.var_to_sources.items() if any(x.name == wanted for x in sources)), None)


def ep_shape_env(ep: ExportedProgram) -> ShapeEnv | None:
    vals = [n.meta.get("val") for n in ep.graph.nodes if n.op == "placeholder"]
    mode = next((v.fake_mode for v in vals if hasattr(v, "fake_mode")), None)
    return getattr(mode, "shape_env", None)


def input_symbols(ep: ExportedProgram) -> dict[tuple[int, int], object]:
    """(tensor input, axis) -> the symbol of its size, for the program's user inputs that are
    tensors, in order."""
    user = set(ep.graph_signature.user_inputs)
    inputs = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in user]
    tensors = [n.meta["val"] for n in inputs if isinstance(n.meta.get("val"), torch.Tensor)]
    return {
        (i, axis): size.node.expr
        for i, val in enumerate(tensors)
        for axis, size in enumerate(val.shape)
        if isinstance(size, torch.SymInt)
    }


def trace(
    model,
    args: tuple,
    kwargs: dict | None,
    dynamic_shapes=None,
    training: TrainingMode = TrainingMode.EVAL,
    fixed: dict | None = None,
    tests: Tests | None = None,
    small_sizes: bool = True,
) -> ExportedProgram:
    """The program torch.export traces. ``fixed``, when given, is filled with where the trace
    fixed each symbolic size it replaced (see _recording_replacements). With ``tests``, where each
    guard was made is recorded there, and with ``small_sizes`` too, sizes of 0 and 1 of the dynamic
    dimensions are traced as symbols (see dynamic.small_sizes)."""
    if isinstance(model, ExportedProgram):
        return model
    recording = _recording_replacements(fixed) if fixed is not None else contextlib.nullcontext()
    rnns = rnns_as_loops() if dynamic_shapes is not None else contextlib.nullcontext()
    small: contextlib.AbstractContextManager = contextlib.nullcontext()
    if tests is not None:
        small = dynamic_small_sizes(tests) if small_sizes else recording_size_tests(tests)
    try:
        with (
            traced_in_mode(model, training),
            torch.no_grad(),
            recording,
            lstm_final_states_fixed(),
            rnns,
            small,
            quick_fake_kernels(),
        ):
            ep = torch.export.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=False)
    except Exception as e:  # any tracing failure is reported as one
        op = op_without_kernel(e)
        if op is not None:
            raise TraceError(no_kernel_message(op, model, e)) from e
        raise TraceError(f"torch.export.export failed to trace {type(model).__name__}: {describe_failure(e)}") from e
    _refuse_quantized(ep, model)
    return ep


_aten = torch.ops.aten
_QUANTIZING = frozenset({_aten.quantize_per_tensor, _aten.quantize_per_channel, _aten.quantize_per_tensor_dynamic})


def _refuse_quantized(ep: ExportedProgram, model) -> None:
    """torch.export traces the ops that make quantized tensors of float ones (quantize_per_tensor),
    recording float32 values for them, but a quantized tensor has no ONNX form in its graph; the
    TorchScript front end keeps one as its integers, scale and zero point."""
    for node in ep.graph.nodes:
        if getattr(node.target, "overloadpacket", None) in _QUANTIZING:
            raise TraceError(
                f"torch.export traced {type(model).__name__} into quantized tensors (FX node `{node.name}`), "
                "which only the TorchScript front end converts"
            )


@contextlib.contextmanager
def _recording_replacements(fixed: dict):
    """Records, per symbolic size the trace replaces (by a number or another expression), what
    replaced it and the model's source line doing it: torch.export keeps no user location of a
    specialization when it traces without dynamo. Without the private method it wraps (another
    torch), nothing is recorded."""
    original = getattr(ShapeEnv, "_set_replacement", None)
    if original is None:
        yield
        return

    @functools.wraps(original)
    def set_replacement(self, a, tgt, msg, *rest, **kw):
        # "find" only shortens a chain recorded before; its stack is a later, unrelated lookup.
        if msg != "find" and a not in fixed:
            # Innermost first, from the caller: the frames before trace()'s are the model's code
            # and torch's; past it, fastonnx.export's caller, which a replacement made after
            # tracing would name.
            frames = traceback.StackSummary.extract(traceback.walk_stack(sys._getframe(1)), lookup_lines=False)
            inner = next((i for i, f in enumerate(frames) if f.filename == __file__), len(frames))
            fixed[a] = (tgt, user_frame(frames[inner - 1 :: -1] if inner else []))
        return original(self, a, tgt, msg, *rest, **kw)

    ShapeEnv._set_replacement = set_replacement  # type: ignore[method-assign]  # for this trace only
    try:
        yield
    finally:
        ShapeEnv._set_replacement = original  # type: ignore[method-assign]  # the method as it was


def innermost(e: BaseException) -> BaseException:
    """The last exception of ``e``'s chain of causes (``__cause__``, else an unsuppressed
    ``__context__``)."""
    return _chain(e)[-1]


def _chain(e: BaseException) -> list[BaseException]:
    """``e`` and the exceptions it was raised from, down to innermost(e)."""
    chain, seen = [e], {id(e)}
    while True:
        nxt = e.__cause__ if e.__cause__ is not None else (None if e.__suppress_context__ else e.__context__)
        if nxt is None or id(nxt) in seen:
            return chain
        seen.add(id(nxt))
        chain.append(nxt)
        e = nxt


def describe_failure(e: BaseException) -> str:
    """The innermost cause torch gives (``Type: first line``), the model's source line it came
    from, the exception torch raised when it differs, then the rest of the message."""
    cause = innermost(e)
    first, *rest = _without_dispatch_table(str(cause)).strip().splitlines() or [""]
    text = f"{type(cause).__name__}: {first}" + _user_line(e)
    if cause is not e:
        outer = str(e).strip().splitlines()
        text += f"\n(torch.export raised {type(e).__name__}" + (f": {outer[0]}" if outer else "") + ")"
    return "\n".join([text, *rest])


def _user_line(e: BaseException) -> str:
    """The model's source line ``e`` came from, as "at FILE:LINE, in NAME" and its code: the
    innermost frame outside torch and fastonnx in the innermost cause's traceback or, failing
    that, in an outer one's."""
    *outer, cause = _chain(e)
    tracebacks = (traceback.extract_tb(x.__traceback__) for x in (cause, *outer))
    frame = next((f for f in map(user_frame, tracebacks) if f is not None), None)
    if frame is None:
        return ""
    return f"\n  at {frame.filename}:{frame.lineno}, in {frame.name}" + (f"\n    {frame.line}" if frame.line else "")


# torch's dispatcher's error for an op without a kernel for the inputs' backend (eager, torch.jit.trace)
_COULD_NOT_RUN = re.compile(r"Could not run '([^']+)' with arguments from the '\w+' backend")


def op_without_kernel(e: BaseException) -> str | None:
    """The operator (``ns::name[.overload]``) that failed in ``e``'s chain when it has no kernel for
    any dispatch key and no fake implementation (a ``torch.library`` op defined and never given
    one): no tracer can run it, torch.export on fake tensors nor torch.jit.trace on the example.
    torch.export's fake tensors name it in an UnsupportedOperatorException, the dispatcher in its
    message."""
    from torch._subclasses.fake_tensor import UnsupportedOperatorException

    for x in _chain(e):
        if isinstance(x, UnsupportedOperatorException) and isinstance(x.func, torch._ops.OpOverload):
            name = x.func.name()
        elif isinstance(x, NotImplementedError) and (found := _COULD_NOT_RUN.search(str(x))) is not None:
            name = found.group(1)
        else:
            continue
        return name if _has_no_kernel(name) else None
    return None


def _has_no_kernel(name: str) -> bool:
    """No dispatch key has a kernel of the op (a fake implementation registers one for Meta, a
    composite one for its alias key)."""
    try:
        if not torch._C._dispatch_has_kernel(name):  # (not an op the dispatcher knows)
            return False
    except RuntimeError:  # (not an operator's name: a message worded like the dispatcher's)
        return False

    def has(key: str) -> bool:
        try:
            return torch._C._dispatch_has_kernel_for_dispatch_key(name, key)
        except RuntimeError:  # (the enum's markers of ranges, no keys of their own)
            return False

    return not any(has(key) for key in torch._C.DispatchKey.__members__)


def no_kernel_message(op: str, model, e: BaseException) -> str:
    """What a failure at an op with no kernel and no fake implementation says: once, for both
    tracers, with the user's line and what to register."""
    return (
        f"{op} has no kernel and no fake implementation, so {type(model).__name__} cannot be traced through it: "
        "torch.export runs an op's fake implementation, torch.jit.trace its kernel"
        + _user_line(e)
        + f'\nRegister one with torch.library: a fake implementation (@torch.library.register_fake("{op}"), '
        "returning empty outputs of the right shapes and dtypes) is enough to export it with a converter "
        f'(fastonnx.register_converter); a kernel (@torch.library.impl("{op}", "cpu")) runs it eagerly too.'
    )


# torch's dispatcher ends "Could not run 'op' with arguments from the 'CPU' backend" with every
# dispatch key the op has (one sentence with about 40 keys, then a line per key): noise to a user.
_BACKEND_LIST = re.compile(r" '[^']+' is only available for these backends: \[[^\]]*\]\.")
_DISPATCH_LINE = re.compile(r"^\w+: (fallthrough )?registered at \S+ \[[^\]]+\]$")


def _without_dispatch_table(message: str) -> str:
    lines = [line for line in _BACKEND_LIST.sub("", message).splitlines() if not _DISPATCH_LINE.match(line.strip())]
    return "\n".join(lines)


def _mutated_arg(node: torch.fx.Node, schema: torch.FunctionSchema) -> torch.fx.Node | None:
    for i, a in enumerate(schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            value = node.args[i] if i < len(node.args) else node.kwargs.get(a.name)
            return value if isinstance(value, torch.fx.Node) else None
    return None


def _returns_alias(schema: torch.FunctionSchema) -> bool:
    return bool(schema.returns) and schema.returns[0].alias_info is not None


def _stale_reads(graph: torch.fx.Graph) -> list[list[torch.fx.Node]]:
    """The alias classes (a tensor and its views, in graph order) of ``graph`` with a mutation
    that something reads after it through another name: where converting in-place ops as their
    functional twins is not exact."""
    order = {n: i for i, n in enumerate(graph.nodes)}
    root: dict[torch.fx.Node, torch.fx.Node] = {}
    members: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        r = n
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and _returns_alias(n.target._schema):
            src = n.args[0] if n.args and isinstance(n.args[0], torch.fx.Node) else None
            if src is not None:
                r = root.get(src, src)
        elif n.target is operator.getitem and isinstance(n.args[0], torch.fx.Node):
            # one of the views a split, unbind or chunk returns (not an output of another op)
            r = r if root.get(n.args[0], n.args[0]) is n.args[0] else root[n.args[0]]
        root[n] = r
        members.setdefault(r, []).append(n)
    stale: dict[torch.fx.Node, list[torch.fx.Node]] = {}
    for n in graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        mutated = _mutated_arg(n, n.target._schema)
        if mutated is None or root[mutated] in stale:
            continue
        for alias in members[root[mutated]]:
            if order[alias] < order[n] and any(order[u] > order[n] for u in alias.users if u is not n):
                stale[root[mutated]] = members[root[mutated]]
                break
    return list(stale.values())


def needs_functionalization(graph: torch.fx.Graph) -> bool:
    """In-place ops are converted as their functional twins, which is exact unless something
    reads the mutated tensor (or a view of it) after the mutation through another name."""
    return bool(_stale_reads(graph))


def program_needs_functionalization(ep: ExportedProgram) -> bool:
    """needs_functionalization of the program's graph or of a function of its control flow (the
    submodules cond, while_loop and scan call); functionalize() rewrites those too."""
    return any(
        needs_functionalization(m.graph) for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule)
    )


def functional_graph(ep: ExportedProgram) -> torch.fx.Graph | None:
    """A copy of the program's graph in which each tensor that is mutated and read after through
    another name (made by the graph, not an input or a weight) is computed functionally: its
    nodes, from the one making it to the last mutation or view of it, traced again through
    functionalization on their recorded fake values, and spliced in place of them. Only those
    nodes are traced, where ``functionalize`` traces the whole program again (which costs as much
    as the export on a graph full of symbolic shapes). None when some mutation is not of that kind
    (of an input, a weight, in a control-flow function), or tracing it again fails: then
    ``functionalize`` decides."""
    functions = [m for m in ep.graph_module.modules() if isinstance(m, torch.fx.GraphModule)]
    if any(needs_functionalization(m.graph) for m in functions if m is not ep.graph_module):
        return None
    graph = torch.fx.Graph(owning_module=ep.graph_module)
    graph.output(graph.graph_copy(ep.graph, {}))
    shape_env = ep_shape_env(ep)
    fake_mode = next(
        (v.fake_mode for n in graph.nodes if n.op == "placeholder" and hasattr(v := n.meta.get("val"), "fake_mode")),
        None,
    )
    if fake_mode is None:
        return None
    for members in _stale_reads(graph):
        try:
            functional = _functionalized_region(graph, members, fake_mode, shape_env)
        except Exception:  # noqa: BLE001 - whatever fails here, the whole program's retrace decides
            return None
        if not functional:
            return None
    graph.lint()
    return graph


_WHERE_MADE = ("stack_trace", "nn_module_stack", "source_fn_stack")


def _functionalized_region(graph: torch.fx.Graph, members: list[torch.fx.Node], fake_mode, shape_env) -> bool:
    """Replaces, in ``graph``, a mutated tensor's nodes (``members``: it, its views, the
    mutations returning it) and the other mutations of them by their functional trace; False
    when that is not exact here: the tensor is an input or a constant, or something outside reads
    one of them before the last of them (it would see the value at that point, not the last)."""
    if members[0].op != "call_function":
        return False
    inside = set(members)
    for n in graph.nodes:
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload):
            mutated = _mutated_arg(n, n.target._schema)
            if mutated is not None and mutated in inside:
                inside.add(n)
    nodes = [n for n in graph.nodes if n in inside]
    order = {n: i for i, n in enumerate(graph.nodes)}
    last = order[nodes[-1]]
    read = [n for n in nodes if any(u not in inside for u in n.users)]
    for n in read:
        if any(u not in inside and (order[u] < last or u.op == "output") for u in n.users):
            return False
    inputs: list[torch.fx.Node] = []
    for n in nodes:
        for a in n.all_input_nodes:
            if a not in inside and a not in inputs:
                inputs.append(a)

    def replay(*values):
        env = dict(zip(inputs, values))
        for n in nodes:
            args, kwargs = torch.fx.map_arg((n.args, n.kwargs), lambda a: env[a])
            env[n] = n.target(*args, **kwargs)
        return [env[n] for n in read]

    before = set(shape_env.replacements) if shape_env is not None else set()
    with fake_mode, retracing(shape_env, "functionalizing the mutated tensors"):
        sub = make_fx(dispatch_functionalize(replay), tracing_mode="real")(*(a.meta["val"] for a in inputs))
    if shape_env is not None and set(shape_env.replacements) - before:
        return False  # (it fixed a size: the whole program's retrace says so, or fixes it as torch does)
    env: dict[torch.fx.Node, torch.fx.Node] = {}
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    env.update(zip(placeholders, inputs))
    # (where the tensor was made: for error messages, reports and module scopes)
    inherited = {k: nodes[0].meta[k] for k in _WHERE_MADE if k in nodes[0].meta}
    outputs: list = []
    anchor = nodes[-1]  # (every input of the nodes is before it, every reader outside after it)
    for n in sub.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            outputs = list(torch.fx.map_arg(n.args[0], lambda a: env[a]))
            continue
        if n.op != "call_function":
            raise NotImplementedError(f"a {n.op} node in the functional trace")
        with graph.inserting_after(anchor):
            copy = graph.node_copy(n, lambda a: env[a])
        copy.meta.update(inherited)
        env[n] = anchor = copy
    for n, value in zip(read, outputs):
        for user in list(n.users):
            if user not in inside:
                user.replace_input_with(n, value)
    for n in reversed(nodes):
        graph.erase_node(n)
    return True


def functionalize(ep: ExportedProgram) -> ExportedProgram:
    # An empty decomposition table: functionalize, decompose nothing.
    shape_env = ep_shape_env(ep)
    try:
        with retracing(shape_env, "functionalizing the traced program"):
            functional = ep.run_decompositions({})
    except Exception as e:  # torch's re-trace of a program it traced
        raise TraceError(
            f"functionalizing the traced program (ExportedProgram.run_decompositions) failed: {describe_failure(e)}"
        ) from e
    domains = domains_of(shape_env) if shape_env is not None else None
    new_env = ep_shape_env(functional)
    if domains is not None and new_env is not None:  # (the program's sizes, in the ShapeEnv of the new one)
        settle(new_env, functional.range_constraints, domains)
    return functional
