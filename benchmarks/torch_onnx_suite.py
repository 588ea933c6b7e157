"""PyTorch's own ONNX test suite run with its export step replaced: fastonnx and torch.onnx's
TorchScript exporter side by side, test by test, in one run.

    python -m benchmarks.torch_onnx_suite --tests DIR [--exporter fastonnx|torchscript|both] [--opset 18]
        [--script] [--keep-initializers-as-inputs] [-k PATTERN ...] [--timeout 120] [--json OUT]

The suite is ``TestONNXRuntime`` of PyTorch 2.6's ``test/onnx/test_pytorch_onnx_onnxruntime.py`` (the
last release whose tests target the TorchScript exporter), in its tracing variant at one opset:
``TestONNXRuntime_opset_version_18_is_script_False_keep_initializers_as_inputs_False`` by default
(``..._True`` with --keep-initializers-as-inputs). --script runs the scripting variant,
``..._is_script_True_...``, where the suite's ``run_test`` hands each exporter the model after
``torch.jit.script`` (and compares without flattening the outputs or dropping None ones). ``-k`` selects tests whose name holds PATTERN (a
glob when it holds ``*?[``); several ``-k`` select the union.

DIR is that release's ``test/onnx`` folder. On a fresh Debian machine, add Debian's source archive
as a stanza of its own, /etc/apt/sources.list.d/debian-src.sources (the one-line form is
``deb-src http://deb.debian.org/debian trixie main``):

    Types: deb-src
    URIs: http://deb.debian.org/debian
    Suites: trixie
    Components: main
    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

then fetch the source package and unpack only the tests:

    apt-get update && apt-get source --download-only pytorch
    tar -xJf pytorch_2.6.0+dfsg.orig.tar.xz --wildcards '*/test/onnx/*'   # DIR=pytorch-v2.6.0/test/onnx
    pip install parameterized expecttest

The tests import torchvision at the top; where it does not load beside the installed torch (PyPI's
wheels are built against one torch build), a stand-in module takes its place and each test that uses
it is skipped with the reason "torchvision does not load ...", counted apart from the suite's own
skips.

What is replaced. ``onnx_test_common.run_model_test`` (what ``run_test`` calls; in 2.6 it called
``torch.onnx.verification.verify``) and ``torch.onnx.export`` (some tests export and run
onnxruntime themselves):

- torchscript: ``verify`` of torch's legacy copy (torch.onnx._internal.torchscript_exporter.verification,
  the same code as 2.6's) with the options the test passed, and ``torch.onnx.export(..., dynamo=False)``.
- fastonnx: ``fastonnx.export`` (default tracer) with the test's opset, dynamic_axes, names, training and
  keep_initializers_as_inputs, then the legacy verify's own comparison (its functions, called in its
  order): the model deep-copied before the export, eager outputs against onnxruntime's on the test
  input and on every ``additional_test_inputs`` set, with the test's rtol/atol, flatten/ignore_none,
  check_shape/check_dtype. The inputs fed are those the graph takes: the TorchScript exporter makes a
  Python number an input and drops the inputs its graph does not read (the test's
  ``remained_onnx_input_idx`` lists the ones it keeps); fastonnx bakes numbers in and keeps every
  tensor input, so it is fed all inputs, or all tensors, or the test's list, whichever matches the
  graph's input count. In the scripting class verify feeds the TorchScript exporter's graph the
  arguments unflattened (a list as an ONNX sequence); fastonnx takes the tensors of a list or tuple
  as inputs of their own (its README), so it is fed flattened there too, the test's list of kept
  arguments mapped onto their flattened inputs. fastonnx writes a complex output as a real tensor
  whose last dimension holds the real and imaginary parts (its README): it is compared with
  ``torch.view_as_real`` of eager's.

Some tests assert that the TorchScript exporter fails (``assertRaises`` around ``run_test``). Under
fastonnx, such a block that raised nothing because every export inside it ran and its outputs
matched eager's does not fail the test, which goes on; a test that then passes is ``exceeds``,
counted apart from passed and failed, with each such block listed. A block holding an export that
failed, or whose outputs were not compared (a direct ``torch.onnx.export``), fails as before.

Each failure gets a bucket, from the step that raised the exception (each step's function is
wrapped to tag what it raises): ``numeric mismatch`` (the output comparison's allclose), ``shape/dtype
mismatch`` (output count, shape or dtype), ``export error`` (raised by the exporter), ``onnxruntime
error`` (loading or running the model), ``test error`` (anything else: the test's own assertions,
the eager model, this harness), ``timeout`` (--timeout seconds) or ``crash`` (the interpreter died).
The summary also counts the passes that ran no export: run_test exports nothing for a scripted model
in the tracing class, nor in the scripting class for a test that turns scripting off
(``is_script_test_enabled``), so those tests pass without testing an exporter.

Tests run one at a time in a worker process, torchscript then fastonnx for each; a worker that dies
or hangs past the timeout is replaced and goes on with the next test. Progress goes to stderr, the
summary to stdout, every test's record to --json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import fnmatch
import functools
import importlib.abc
import importlib.machinery
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import types
import unittest
import warnings
from pathlib import Path

EXPORTERS = ("torchscript", "fastonnx")
BUCKETS = (
    "numeric mismatch",
    "shape/dtype mismatch",
    "export error",
    "onnxruntime error",
    "test error",
    "timeout",
    "crash",
)
MESSAGE_CHARS = 500
# A worker whose test outlives the in-process alarm by this much is stuck where a signal cannot
# reach (native code holding the GIL) and is killed.
KILL_GRACE_SECONDS = 60
# Workers run as ``python -m benchmarks.torch_onnx_suite`` from here, as the harness itself is run.
REPO = Path(__file__).resolve().parents[1]


def _class_name(opset: int, script: bool, keep_initializers_as_inputs: bool) -> str:
    keep = keep_initializers_as_inputs
    return f"TestONNXRuntime_opset_version_{opset}_is_script_{script}_keep_initializers_as_inputs_{keep}"


# --- worker: the suite, imported under torch 2.13 with the export step replaced ------------------


class _State:
    exporter = "torchscript"
    # Exceptions tagged with the phase that raised them, by id (the exception is kept, so the id
    # stays its own); cleared before each test.
    buckets: dict[int, tuple[BaseException, str]] = {}
    # Exports the test ran: a test that passes without one did not exercise the exporter.
    exports = 0
    # fastonnx exports whose outputs matched eager's on every input set the test gave.
    compared = 0
    # The assertRaises blocks around exports that fastonnx ran and matched (see _patch_assert_raises).
    exceeded: list[str] = []
    # The reason a package that does not load was touched by the test, if it was.
    unavailable: str | None = None


class _Timeout(BaseException):
    """Raised by the alarm. A BaseException, so that the tests' and torch's ``except Exception``
    do not swallow it; unittest still records it as the test's error."""


@contextlib.contextmanager
def _bucket(name: str):
    try:
        yield
    except Exception as e:
        # Re-raised unchanged. The innermost phase tags first (an export error inside verify stays an export error).
        _State.buckets.setdefault(id(e), (e, name))
        raise


def _in_bucket(name: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _bucket(name):
            return fn(*args, **kwargs)

    return wrapper


def _mismatch_bucket(message: str) -> str:
    structural = ("Number of outputs differ", "attribute 'shape'", "attribute 'dtype'")
    return "shape/dtype mismatch" if any(s in message for s in structural) else "numeric mismatch"


def _complex_as_real(value):
    """``value`` with each complex tensor as fastonnx writes it (its README): a real tensor whose
    last dimension holds the real and imaginary parts."""
    import torch
    import torch.utils._pytree as pytree

    def leaf(x):
        return torch.view_as_real(x.resolve_conj()) if isinstance(x, torch.Tensor) and x.is_complex() else x

    return pytree.tree_map(leaf, value)


def _compare_in_bucket(compare):
    @functools.wraps(compare)
    def wrapper(onnx_outs, pt_outs, options):
        if _State.exporter == "fastonnx":
            pt_outs = _complex_as_real(pt_outs)
        try:
            return compare(onnx_outs, pt_outs, options)
        except AssertionError as e:
            _State.buckets.setdefault(id(e), (e, _mismatch_bucket(str(e))))
            raise
        except (TypeError, ValueError) as e:
            # np.broadcast_arrays of shapes that do not broadcast (check_shape=False), or
            # assert_close given values of unlike kinds.
            _State.buckets.setdefault(id(e), (e, "shape/dtype mismatch"))
            raise

    return wrapper


class _Unavailable(types.ModuleType):
    """Stands for a package that does not load here: the test module imports it at the top, and a
    test that touches it is skipped (not applicable on this machine) instead of failing. It raises
    SkipTest, and also remembers the touch, for code that turns the SkipTest into an error of its
    own (torch.jit.script's compiler, an exporter tracing the model)."""

    reason = ""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        _State.unavailable = self.reason
        raise unittest.SkipTest(self.reason)


class _UnavailableFinder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str, reason: str):
        self.package, self.reason = package, reason

    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(self.package + "."):
            _State.unavailable = self.reason
            raise unittest.SkipTest(self.reason)
        return None


def _install_shims(tests_dir: Path) -> None:
    import torch

    sys.path.insert(0, str(tests_dir))

    # pytorch_test_common's setUp clears the diagnostics engine of 2.6's dynamo exporter, which
    # torch 2.13 no longer has.
    diagnostics = types.ModuleType("torch.onnx._internal.diagnostics")
    diagnostics.engine = types.SimpleNamespace(clear=lambda: None)  # type: ignore[attr-defined]
    sys.modules[diagnostics.__name__] = diagnostics
    torch.onnx._internal.diagnostics = diagnostics  # type: ignore[attr-defined]

    try:
        import torchvision.ops  # noqa: F401
    except Exception as e:  # noqa: BLE001 - a wheel built for another torch fails with RuntimeError or OSError too
        for name in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
            del sys.modules[name]
        first_line = (str(e).splitlines() or [""])[0]
        reason = f"torchvision does not load beside torch {torch.__version__} ({type(e).__name__}: {first_line})"
        stand_in = _Unavailable("torchvision")
        stand_in.reason = reason
        stand_in.__path__ = []
        stand_in.__spec__ = importlib.machinery.ModuleSpec("torchvision", None, is_package=True)
        sys.modules["torchvision"] = stand_in
        sys.meta_path.insert(0, _UnavailableFinder("torchvision", reason))


def _legacy():
    from torch.onnx._internal.torchscript_exporter import verification

    return verification


def _run_model_test(test_suite, *args, **kwargs):
    """2.6's ``onnx_test_common.run_model_test``, with the exporter under test's verify."""
    legacy = _legacy()
    options = legacy.VerificationOptions()
    kwargs["opset_version"] = test_suite.opset_version
    kwargs["keep_initializers_as_inputs"] = test_suite.keep_initializers_as_inputs
    if hasattr(test_suite, "check_shape"):
        options.check_shape = test_suite.check_shape
    if hasattr(test_suite, "check_dtype"):
        options.check_dtype = test_suite.check_dtype
    names = {f.name for f in dataclasses.fields(options)}
    for key in [k for k in kwargs if k in names]:
        setattr(options, key, kwargs.pop(key))
    verify = legacy.verify if _State.exporter == "torchscript" else _fastonnx_verify
    return verify(*args, options=options, **kwargs)


def _fastonnx_options(options: dict) -> dict:
    """torch.onnx.export's keyword arguments as fastonnx takes them. Those fastonnx does not take
    are dropped where fastonnx already does what they ask; any other is passed on, and fastonnx
    raises the ArgumentError a user would get."""
    from torch.onnx import OperatorExportTypes

    options = dict(options)
    # fastonnx always folds constants; the suite turns folding off to keep training-mode dropout,
    # which fastonnx keeps in training mode anyway.
    options.pop("do_constant_folding", None)
    # A hint to the legacy RNN symbolics to keep the batch size static; fastonnx's axes are static
    # unless dynamic_axes names them.
    options.pop("fixed_batch_size", None)
    # Standard ONNX, the only kind fastonnx writes.
    if options.get("operator_export_type") == OperatorExportTypes.ONNX:
        del options["operator_export_type"]
    return options


def _fastonnx_export(model, args, f=None, **options):
    import fastonnx

    _State.exports += 1
    with _bucket("export error"):
        return fastonnx.export(model, args, f, **_fastonnx_options(options))


def _graph_input_leaves(value, in_key: bool = False) -> list[bool]:
    """For each input torch.jit._flatten makes of ``value`` (what verify feeds onnxruntime), whether
    fastonnx's graph takes it as an input. Tensors it does; Python numbers (which _flatten turns
    into tensors) and dict keys (which _flatten flattens with the values) are constants of its
    trace. None and strings _flatten drops."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _graph_input_leaves(item, in_key)]
    if isinstance(value, dict):
        return [
            leaf
            for key, item in value.items()
            for leaf in (*_graph_input_leaves(key, True), *_graph_input_leaves(item, in_key))
        ]
    if isinstance(value, (bool, int, float)):
        return [False]
    import torch

    return [not in_key] if isinstance(value, torch.Tensor) else []


def _fed_inputs(model_proto, input_args, input_kwargs, remained_onnx_input_idx, flatten: bool) -> list[int]:
    """The indices, into the inputs verify flattens, of those to feed fastonnx's graph (see the
    module docstring). When none of the candidates matches the graph's input count, the tensors are
    fed and onnxruntime reports the mismatch. Without ``flatten`` (the scripting class), the test's
    ``remained_onnx_input_idx`` counts arguments, each mapped onto its flattened inputs."""
    import torch

    export_inputs = _legacy()._prepare_input_for_export(input_args, input_kwargs)
    flat, _ = torch.jit._flatten(export_inputs)
    if not flatten and remained_onnx_input_idx is not None:
        starts = [0]
        for argument in export_inputs:
            starts.append(starts[-1] + len(torch.jit._flatten(argument)[0]))
        remained_onnx_input_idx = [j for i in remained_onnx_input_idx for j in range(starts[i], starts[i + 1])]
    initializers = {t.name for t in model_proto.graph.initializer}
    graph_inputs = sum(1 for i in model_proto.graph.input if i.name not in initializers)
    tensors = [i for i, is_input in enumerate(_graph_input_leaves(export_inputs)) if is_input]
    for fed in (list(range(len(flat))), tensors, remained_onnx_input_idx):
        # A quantized tensor is fed as three (values, scale, zero point), as verify unpacks it.
        if fed is not None and sum(3 if flat[i].is_quantized else 1 for i in fed) == graph_inputs:
            return list(fed)
    return tensors


def _fastonnx_verify(model, input_args, input_kwargs, additional_test_inputs, *, options, training, **export_options):
    """The legacy verify with fastonnx's export: same model preparation, copy and comparison.
    run_test passes every argument."""
    import torch
    from torch.onnx import TrainingMode

    legacy = _legacy()
    if training == TrainingMode.TRAINING:
        model.train()
    elif training == TrainingMode.EVAL:
        model.eval()
    with torch.no_grad():
        args, kwargs = legacy._prepare_input_for_pytorch(input_args, input_kwargs)
        # Taken before the export, which may change the model's state, as verify does.
        model_copy = legacy._try_clone_model(model)
        result = _fastonnx_export(model, args, kwargs=kwargs or None, training=training, **export_options)
        fed = _fed_inputs(
            result.model_proto, input_args, input_kwargs, options.remained_onnx_input_idx, options.flatten
        )
        legacy._compare_onnx_pytorch_model(
            pt_model=model_copy,
            onnx_model_f=io.BytesIO(result.to_bytes()),
            input_args=input_args,
            input_kwargs=input_kwargs,
            additional_test_inputs=additional_test_inputs,
            # (fed flattened: fastonnx takes a list's tensors as inputs of their own)
            options=dataclasses.replace(options, remained_onnx_input_idx=fed, flatten=True),
        )
    _State.compared += 1


def _patch_assert_raises() -> None:
    """Under fastonnx, an assertRaises block around exports (the test asserting the TorchScript
    exporter's failure) that raised nothing because every export inside it ran and its outputs
    matched eager's is recorded in ``_State.exceeded`` instead of failing, and the test goes on (a
    later block may hold exports too). A block with an export that failed (its exception is the
    one the block expected, or it ends the test), with an export whose outputs were not compared
    (a direct torch.onnx.export), or with no export fails as unittest fails it."""
    context = unittest.case._AssertRaisesContext
    enter, exit_ = context.__enter__, context.__exit__

    def __enter__(self):
        self._exports_before = (_State.exports, _State.compared)
        return enter(self)

    def __exit__(self, exc_type, exc_value, tb):
        if exc_type is None and _State.exporter == "fastonnx":
            exports_before, compared_before = self._exports_before
            exports, compared = _State.exports - exports_before, _State.compared - compared_before
            if exports and compared == exports:
                expected = getattr(self.expected, "__name__", str(self.expected))
                _State.exceeded.append(f"{expected} not raised: {exports} export(s) matched eager")
                return False
        return exit_(self, exc_type, exc_value, tb)

    context.__enter__, context.__exit__ = __enter__, __exit__


def _patch_suite(suite_module, onnx_test_common) -> None:
    import torch
    from torch.onnx._internal.torchscript_exporter import utils as legacy_utils

    legacy = _legacy()
    onnx_test_common.run_model_test = _run_model_test
    # The 2.6 tests call torch.onnx.verification's private helpers, which 2.13 keeps in the legacy copy.
    suite_module.verification = legacy

    legacy_export = _in_bucket("export error", legacy_utils._export)

    def counted_legacy_export(*args, **kwargs):
        _State.exports += 1
        return legacy_export(*args, **kwargs)

    # verify and torch.onnx.export(dynamo=False) both end in this function.
    legacy_utils._export = counted_legacy_export
    legacy._onnx_backend_session = _in_bucket("onnxruntime error", legacy._onnx_backend_session)
    legacy._ort_session = _in_bucket("onnxruntime error", legacy._ort_session)
    legacy._run_onnx = _in_bucket("onnxruntime error", legacy._run_onnx)
    legacy._compare_onnx_pytorch_outputs = _compare_in_bucket(legacy._compare_onnx_pytorch_outputs)

    torch_export = torch.onnx.export

    def export(model, args=(), f=None, **options):
        if _State.exporter == "torchscript":
            # 2.6's default exporter; 2.13 defaults to dynamo.
            with _bucket("export error"):
                return torch_export(model, args, f, dynamo=False, **options)
        kwargs = options.pop("kwargs", None)
        if kwargs is None and isinstance(args, tuple) and args and isinstance(args[-1], dict):
            # The TorchScript exporter's convention: a trailing dict holds the keyword arguments.
            args, kwargs = args[:-1], args[-1] or None
        if isinstance(f, io.IOBase):
            f.write(_fastonnx_export(model, args, kwargs=kwargs, **options).to_bytes())
        else:
            _fastonnx_export(model, args, f, kwargs=kwargs, **options)
        return None

    torch.onnx.export = export

    # A symbolic registered for torch.onnx is registered with fastonnx under fastonnx, as its
    # README says to port such code.
    register, unregister = torch.onnx.register_custom_op_symbolic, torch.onnx.unregister_custom_op_symbolic

    def register_custom_op_symbolic(*args, **kwargs):
        import fastonnx

        return (register if _State.exporter == "torchscript" else fastonnx.register_custom_op_symbolic)(*args, **kwargs)

    def unregister_custom_op_symbolic(*args, **kwargs):
        import fastonnx

        return (unregister if _State.exporter == "torchscript" else fastonnx.unregister_custom_op_symbolic)(
            *args, **kwargs
        )

    torch.onnx.register_custom_op_symbolic = register_custom_op_symbolic
    torch.onnx.unregister_custom_op_symbolic = unregister_custom_op_symbolic
    _patch_assert_raises()


def _load_suite(tests_dir: Path):
    """Imports the 2.6 test module (its classes for every opset and variant)."""
    _install_shims(tests_dir)
    import onnx_test_common
    import test_pytorch_onnx_onnxruntime as suite_module
    from torch.testing._internal import common_utils

    _patch_suite(suite_module, onnx_test_common)
    # As the test file's __main__ sets it: a test must leave the default dtype as it found it.
    common_utils.TestCase._default_dtype_check_enabled = True
    return suite_module


def _test_names(suite_module, class_name: str) -> list[str]:
    return list(unittest.TestLoader().getTestCaseNames(getattr(suite_module, class_name)))


class _Result(unittest.TestResult):
    """The outcome of one test: the first failure, or the skip."""

    def __init__(self):
        super().__init__()
        self.status, self.skip_reason, self.error = "passed", None, None

    def addSkip(self, test, reason):
        self.status, self.skip_reason = "skipped", reason

    def addError(self, test, err):
        if self.error is None:
            self.status, self.error = "failed", err[1]

    addFailure = addError


def _failure_bucket(error: BaseException) -> str:
    # The exception the test ended with may be raised while handling the tagged one (an
    # assertRaisesRegex whose pattern the exporter's message does not match).
    seen = error
    while seen is not None:
        tagged = _State.buckets.get(id(seen))
        if tagged is not None and tagged[0] is seen:
            return tagged[1]
        seen = seen.__cause__ or seen.__context__
    return "timeout" if isinstance(error, _Timeout) else "test error"


def _run_one(test_class, name: str, exporter: str, timeout: float) -> dict:
    _State.exporter = exporter
    _State.buckets.clear()
    _State.exports, _State.compared, _State.unavailable = 0, 0, None
    _State.exceeded = []
    result = _Result()
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        test_class(name).run(result)
    except _Timeout as e:
        # Fired outside the test's own code (in unittest's bookkeeping), after it had run.
        result.status, result.error = "failed", e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    if result.status == "failed" and _State.unavailable is not None:
        result.status, result.skip_reason, result.error = "skipped", _State.unavailable, None
    if result.status == "passed" and _State.exceeded:
        result.status = "exceeds"
    record = {
        "test": name,
        "exporter": exporter,
        "status": result.status,
        "exports": _State.exports,
        "seconds": round(time.perf_counter() - start, 3),
    }
    if result.status == "skipped":
        record["skip_reason"] = result.skip_reason
    if _State.exceeded:
        record["exceeded"] = list(_State.exceeded)
    if result.error is not None:
        message = " ".join(str(result.error).split())
        record.update(
            bucket=_failure_bucket(result.error),
            exc_type=type(result.error).__name__,
            message=message[:MESSAGE_CHARS],
        )
        if len(message) > MESSAGE_CHARS:
            # A long message ends with what matters too (fastonnx's "the TorchScript front end
            # failed too: ..." after torch.export's error).
            record["message_end"] = message[-MESSAGE_CHARS:]
    _State.buckets.clear()
    return record


def _worker(args) -> None:
    def on_alarm(signum, frame):
        raise _Timeout(f"no result after {args.timeout:g} s")

    signal.signal(signal.SIGALRM, on_alarm)
    suite_module = _load_suite(args.tests)
    test_class = getattr(suite_module, _class_name(args.opset, args.script, args.keep_initializers_as_inputs))
    pairs = json.loads(Path(args.worker[0]).read_text())
    with open(args.worker[1], "a", buffering=1) as events:
        for name, exporter in pairs:
            events.write(json.dumps({"event": "start", "test": name, "exporter": exporter}) + "\n")
            record = _run_one(test_class, name, exporter, args.timeout)
            events.write(json.dumps({"event": "result", **record}) + "\n")


# --- parent: selection, workers, summary ---------------------------------------------------------


def _selected(names: list[str], patterns: list[str] | None) -> list[str]:
    if not patterns:
        return names

    def matches(name: str, pattern: str) -> bool:
        return fnmatch.fnmatchcase(name, pattern) if any(c in pattern for c in "*?[") else pattern in name

    return [n for n in names if any(matches(n, p) for p in patterns)]


def _progress(done: int, total: int, record: dict) -> None:
    outcome = record["status"]
    if outcome == "failed":
        outcome += f" [{record['bucket']}] {record['exc_type']}: {record['message'][:120]}"
    elif outcome == "skipped":
        outcome += f" ({(record.get('skip_reason') or '')[:80]})"
    elif outcome == "exceeds":
        outcome += f" ({'; '.join(record['exceeded'])})"
    seconds = "" if record["seconds"] is None else f" ({record['seconds']:.1f} s)"
    print(f"[{done}/{total}] {record['test']} {record['exporter']}: {outcome}{seconds}", file=sys.stderr, flush=True)


def _run_worker(args, pairs: list, tmp: Path, first: int, total: int) -> tuple[list[dict], str | None]:
    """Runs ``pairs`` in one worker until it ends. Returns the records and, when it died or hung
    in a test, how (``crash`` or ``timeout``) for the pair it was running."""
    todo, events_path, log_path = tmp / f"todo{first}.json", tmp / f"events{first}.jsonl", tmp / f"worker{first}.log"
    todo.write_text(json.dumps(pairs))
    events_path.touch()
    command = [sys.executable, "-m", "benchmarks.torch_onnx_suite", "--tests", str(args.tests)]
    command += ["--opset", str(args.opset), "--timeout", str(args.timeout), "--worker", str(todo), str(events_path)]
    if args.script:
        command.append("--script")
    if args.keep_initializers_as_inputs:
        command.append("--keep-initializers-as-inputs")
    records: list[dict] = []
    started_at = None
    with open(log_path, "w") as log, open(events_path) as events:
        # Without the repro command common_utils appends to each failure's message.
        env = {**os.environ, "PYTORCH_PRINT_REPRO_ON_FAILURE": "0"}
        worker = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        pending = ""
        while True:
            finished = worker.poll() is not None
            pending += events.read()
            *lines, pending = pending.split("\n")
            for line in lines:
                event = json.loads(line)
                if event["event"] == "start":
                    started_at = time.monotonic()
                else:
                    started_at = None
                    record = {k: v for k, v in event.items() if k != "event"}
                    records.append(record)
                    _progress(first + len(records), total, record)
            if finished:
                break
            if started_at is not None and time.monotonic() - started_at > args.timeout + KILL_GRACE_SECONDS:
                worker.kill()
                worker.wait()
                return records, "timeout"
            time.sleep(0.5)
    if len(records) == len(pairs):
        return records, None
    tail = log_path.read_text(errors="replace").splitlines()[-20:]
    print(f"worker exited with {worker.returncode}; its last lines:", *tail, sep="\n  ", file=sys.stderr)
    if started_at is None:
        if not records:
            sys.exit("the worker failed before running a test")
        return records, None  # it died between two tests: a new one goes on
    return records, "crash"


def _run(args, names: list[str], exporters: tuple[str, ...]) -> list[dict]:
    pairs = [[name, exporter] for name in names for exporter in exporters]
    records: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="torch_onnx_suite.") as tmp:
        while len(records) < len(pairs):
            first = len(records)
            done, ended = _run_worker(args, pairs[first:], Path(tmp), first, len(pairs))
            records += done
            if ended is not None:
                name, exporter = pairs[len(records)]
                message = "the interpreter died" if ended == "crash" else "killed: no result and no alarm"
                record = {"test": name, "exporter": exporter, "status": "failed", "exports": None, "seconds": None}
                record.update(bucket=ended, exc_type=ended, message=message)
                records.append(record)
                _progress(len(records), len(pairs), record)
    return records


def _counts(records: list[dict]) -> dict:
    statuses = collections.Counter(r["status"] for r in records)
    return {
        "collected": len(records),
        "skipped": statuses["skipped"],
        "applicable": len(records) - statuses["skipped"],
        "passed": statuses["passed"],
        # run_test exports nothing for a scripted model in the tracing class, nor in the scripting
        # class when the test turns scripting off: such a pass is empty.
        "passed_without_export": sum(1 for r in records if r["status"] == "passed" and r["exports"] == 0),
        # The test asserts the TorchScript exporter's failure; fastonnx exported and matched eager.
        "exceeds": statuses["exceeds"],
        "failed": statuses["failed"],
        "buckets": dict(collections.Counter(r["bucket"] for r in records if r["status"] == "failed")),
    }


def _summary(records: list[dict], exporters: tuple[str, ...], collected: dict[str, int], class_name: str) -> str:
    lines = [f"{name}: {count} tests collected" for name, count in collected.items()]
    lines.append(f"ran {class_name}")
    by_exporter = {e: [r for r in records if r["exporter"] == e] for e in exporters}
    header = f"{'exporter':<12} {'collected':>9} {'skipped':>7} {'applicable':>10} {'passed':>6} {'(no export)':>11} "
    lines += ["", header + f"{'exceeds':>7} {'failed':>6}  failed by bucket"]
    for exporter, mine in by_exporter.items():
        c = _counts(mine)
        buckets = ", ".join(f"{b}: {c['buckets'][b]}" for b in BUCKETS if b in c["buckets"]) or "-"
        lines.append(
            f"{exporter:<12} {c['collected']:>9} {c['skipped']:>7} {c['applicable']:>10} {c['passed']:>6} "
            f"{c['passed_without_export']:>11} {c['exceeds']:>7} {c['failed']:>6}  {buckets}"
        )
    if any(r["status"] == "exceeds" for r in records):
        lines.append(
            "exceeds: the test asserts the TorchScript exporter's failure; fastonnx exported and matched eager"
        )
    skips = collections.Counter(r["skip_reason"] for r in records if r["status"] == "skipped")
    if skips:
        lines += ["", "skip reasons (tests x exporters):"]
        lines += [f"  {n:>4}  {reason}" for reason, n in skips.most_common()]
    if len(exporters) == 2:
        ts, fo = ({r["test"]: r for r in by_exporter[e]} for e in EXPORTERS)
        both = [t for t in ts if t in fo and ts[t]["status"] != "skipped" and fo[t]["status"] != "skipped"]
        cross = collections.Counter((ts[t]["status"], fo[t]["status"]) for t in both)
        lines += [
            "",
            f"cross table over the {len(both)} tests applicable to both (rows torchscript, columns fastonnx):",
        ]
        lines.append(f"{'':<18} {'fastonnx pass':>14} {'fastonnx exceeds':>17} {'fastonnx fail':>14}")
        for row in ("passed", "failed"):
            lines.append(
                f"{'torchscript ' + row[:4]:<18} {cross[row, 'passed']:>14} {cross[row, 'exceeds']:>17} "
                f"{cross[row, 'failed']:>14}"
            )
        one_sided = [t for t in ts if t in fo and (ts[t]["status"] == "skipped") != (fo[t]["status"] == "skipped")]
        if one_sided:
            lines.append(f"skipped under one exporter only: {', '.join(one_sided)}")
        exceeding = [t for t in both if fo[t]["status"] == "exceeds"]
        lines += ["", f"fastonnx exceeds the test's assertion of a TorchScript failure ({len(exceeding)}):"]
        lines += [f"  {t}  ({'; '.join(fo[t]['exceeded'])})" for t in exceeding]
        regressions = [t for t in both if ts[t]["status"] == "passed" and fo[t]["status"] == "failed"]
        lines += ["", f"TorchScript passes, fastonnx fails ({len(regressions)}):"]
        for t in regressions:
            r = fo[t]
            lines.append(f"  {t}  [{r['bucket']}] {r['exc_type']}: {r['message'][:200]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=Path, required=True, help="PyTorch 2.6's test/onnx folder")
    parser.add_argument("--exporter", choices=(*EXPORTERS, "both"), default="both")
    parser.add_argument("--opset", type=int, default=18)
    parser.add_argument("--script", action="store_true", help="run the scripting variant (is_script_True)")
    parser.add_argument("--keep-initializers-as-inputs", action="store_true", help="run the ..._True variant")
    parser.add_argument("-k", action="append", dest="patterns", metavar="PATTERN", help="select tests by name")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test and exporter")
    parser.add_argument("--json", type=Path, help="write every test's record here")
    parser.add_argument("--worker", nargs=2, metavar=("TODO", "EVENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.tests = args.tests.resolve()
    # The suite and both exporters warn a lot (deprecations, fallbacks); assertWarns still sees
    # warnings, as it resets the filters in its block.
    warnings.simplefilter("ignore")
    if args.worker:
        _worker(args)
        return

    start = time.perf_counter()
    import torch

    import fastonnx

    suite_module = _load_suite(args.tests)
    class_name = _class_name(args.opset, args.script, args.keep_initializers_as_inputs)
    collected = {
        _class_name(args.opset, args.script, k): len(_test_names(suite_module, _class_name(args.opset, args.script, k)))
        for k in (False, True)
    }
    names = _selected(_test_names(suite_module, class_name), args.patterns)
    exporters = EXPORTERS if args.exporter == "both" else (args.exporter,)
    print(f"{class_name}: running {len(names)} tests x {', '.join(exporters)}", file=sys.stderr, flush=True)
    records = _run(args, names, exporters)
    seconds = time.perf_counter() - start
    print(_summary(records, exporters, collected, class_name))
    print(f"\n{len(records)} runs in {seconds / 60:.1f} min")
    if args.json:
        meta = {"class": class_name, "collected": collected, "selected": len(names), "exporters": exporters}
        meta.update(torch=torch.__version__, fastonnx=getattr(fastonnx, "__version__", None), seconds=round(seconds))
        counts = {e: _counts([r for r in records if r["exporter"] == e]) for e in exporters}
        args.json.write_text(json.dumps({**meta, "counts": counts, "records": records}, indent=1) + "\n")


if __name__ == "__main__":
    main()
