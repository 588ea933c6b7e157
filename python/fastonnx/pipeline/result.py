"""The result of an export."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .. import _C
from ..core.files import write_atomically
from ..errors import ArgumentError, ExportError
from ..weights.source import Streamed

# protobuf cannot hold a message of 2 GB; the graph itself needs some room beside the weights.
EXTERNAL_DATA_ABOVE = 2**31 - (64 << 20)


def external_data_path(path: str | os.PathLike) -> str:
    """Where the weights of a model saved at ``path`` go: ``<model file name>.data`` beside it."""
    return os.fspath(path) + ".data"


@dataclass
class ExportResult:
    """What ``fastonnx.export`` returns. The model stays in native memory (weights borrowed from
    the torch tensors, never copied) until it is saved or ``model_proto`` is asked for."""

    native: _C.Model
    opset_version: int
    input_names: list[str]
    output_names: list[str]
    exported_program: object = None
    timings: dict[str, float] = field(default_factory=dict)
    model: object = field(default=None, repr=False)  # the nn.Module, for verify()
    tracer: str = "torch.export"  # the front end that traced it: torch.export, torch.jit.trace or torch.jit.script
    streamed: Streamed | None = field(default=None, repr=False)  # weights from a checkpoint (_weights.py)
    # The dynamic dimensions (as the graph names them) that may be 1 at run time: the graph decides
    # there what torch decides for a size of 1 (a squeeze), and verify_other_sizes checks that size.
    sizes_may_be_one: frozenset[str] = frozenset()
    _proto: object = field(default=None, repr=False)

    @property
    def rewrites(self) -> dict:
        """What ``optimize_for`` and ``quantize`` did: ``counts`` (fused op -> how many) and
        ``lines`` (per attention or layer: what was fused, or left plain and why)."""
        return self.native.rewrites

    @property
    def model_proto(self):
        """The model as an ``onnx.ModelProto`` (parsed on first use; weights included, so only
        for models under 2 GB)."""
        if self._proto is None:
            import onnx

            self._proto = onnx.load_from_string(self.to_bytes())
        return self._proto

    def to_bytes(self) -> bytes:
        """The serialized ModelProto, weights included."""
        try:
            return self.native.to_bytes()
        except ValueError as e:  # std::length_error: beyond protobuf's limit
            raise ExportError(str(e)) from None

    def verify(self, *args, rtol: float = 1e-3, atol: float = 1e-5, model=None, **kwargs):
        """Run the ONNX model in onnxruntime and ``model`` (by default the exported module) eagerly
        on the same inputs; print and return the largest absolute and relative difference of
        each output (``OutputDiff``, ``ok`` when every element is within ``atol + rtol * |x|``)."""
        from .verify import compare, format_diffs

        model = model if model is not None else self.model
        if model is None:
            raise ValueError("verify() needs the module to run eagerly: pass model=...")
        diffs = compare(self.to_bytes(), self.input_names, self.output_names, model, args, kwargs, rtol, atol)
        print(format_diffs(diffs))
        return diffs

    def verify_other_sizes(self, *args, rtol: float = 1e-3, atol: float = 1e-5, model=None, **kwargs):
        """``verify`` at other sizes of the dynamic axes: each dynamic input axis one longer than
        in ``args``/``kwargs``, then, where the graph holds for a size of 1 on an axis
        (``sizes_may_be_one``: an axis traced at size 0 or 1, see README "Dynamic shapes"), that
        axis at 1, or at 2 when the example has it empty. Returns the differences (empty when no
        input axis is dynamic, or when eager PyTorch itself does not run at those sizes, which is
        printed)."""
        from .verify import resized_inputs

        model = model if model is not None else self.model
        if model is None:
            raise ValueError("verify_other_sizes() needs the module to run eagerly: pass model=...")
        proto = self.model_proto
        choices = [
            lambda name, size: size + 1,
            lambda name, size: (2 if size == 0 else 1) if name in self.sizes_may_be_one else None,
        ]
        diffs = []
        for size_for in choices:
            resized = resized_inputs(proto, self.input_names, args, kwargs, size_for)
            if resized is not None:
                diffs += self._verify_at(model, *resized, rtol=rtol, atol=atol)
        return diffs

    def _verify_at(self, model, args: tuple, kwargs: dict, sizes: dict[str, int], *, rtol: float, atol: float):
        from .verify import EagerFailed, OutputDiff, compare, format_diffs

        shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
        try:
            diffs = compare(self.to_bytes(), self.input_names, self.output_names, model, args, kwargs, rtol, atol)
        except EagerFailed as e:
            print(f"at {shown}: not checked, eager PyTorch fails there too: {e}")
            return []
        except Exception as e:  # noqa: BLE001 - onnxruntime refusing the sizes is the answer: the file is wrong there
            print(f"at {shown}: onnxruntime fails: {type(e).__name__}: {e}")
            return [OutputDiff(f"(all, at {shown})", float("inf"), float("inf"), False)]
        print(f"at {shown}:\n{format_diffs(diffs)}")
        return diffs

    def save(
        self,
        path: str | os.PathLike,
        *,
        external_data: bool | None = None,
        progress: Callable[[int], None] | None = None,
        progress_total: Callable[[int], None] | None = None,
    ) -> None:
        """Write the model to ``path``, atomically: every file is written under a temporary name
        and renamed when complete. ``external_data`` puts the weights (initializers of 1 KiB or
        more) in ``<path>.data`` beside the model, offsets aligned for memory mapping; by default
        that happens only when the model would exceed protobuf's 2 GB. With weights exported in
        ``weights_mode="reference"``, the model points into the checkpoint's files, which must be
        in ``path``'s directory or below it (an ``ArgumentError`` otherwise), and external data is
        always used. ``progress_total(n)`` is called once, before writing, with the bytes the files
        will hold (the weights a model points at in a checkpoint are not among them), and
        ``progress(n)`` as every n more of them are written."""
        references: list[tuple[int, int, str]] = []
        if self.streamed is not None and self.streamed.mode == "reference":
            external_data, references = True, self.streamed.references(path)
        if external_data is None:
            external_data = self.native.weights_nbytes > EXTERNAL_DATA_ABOVE
        if not external_data:
            write_atomically({path: lambda tmp: self.native.write(tmp, progress=progress, total=progress_total)})
            return
        # One native call writes both files (it lays the data out while serializing the model):
        # the data file's writer only learns its temporary name, the model's writes both.
        data_path = external_data_path(path)
        data_tmp: list[str] = []
        write_atomically(
            {
                data_path: data_tmp.append,
                path: lambda tmp: self.native.write(
                    tmp,
                    data_path=data_tmp[0],
                    location=os.path.basename(data_path),
                    progress=progress,
                    references=references,
                    total=progress_total,
                ),
            }
        )
        # Every weight pointing into a checkpoint leaves the data file empty, and nothing refers
        # to an empty one (an initializer stored externally holds bytes): it goes.
        if os.path.getsize(data_path) == 0:
            os.remove(data_path)


def save_together(
    results: Mapping[str, ExportResult],
    data_path: str | os.PathLike,
    *,
    progress: Callable[[int], None] | None = None,
    progress_total: Callable[[int], None] | None = None,
) -> None:
    """Write each model of ``results`` (a path -> its ExportResult) to that path, with the weights
    of all of them in one external data file, ``data_path``, in the same directory: bytes that
    several models hold (a weight an encoder and a decoder share, a decoder exported twice from
    the same module) are written once, at one offset every model points at. Bytes are the same
    when they are the same memory (the module's tensor, a checkpoint's mapping), computed from it
    the same way (transposed, cast), or equal bytes the export made (a small weight folded).
    Everything is written atomically, as ``ExportResult.save`` does; weights exported with
    ``weights_mode="reference"`` point into the checkpoint's files."""
    data = os.fspath(data_path)
    directory = os.path.dirname(os.path.realpath(data))
    others = [p for p in results if os.path.dirname(os.path.realpath(p)) != directory]
    if others:
        raise ArgumentError(
            f"save_together: the models share {data}, which ONNX finds beside each model; "
            f"{others} are in another directory"
        )
    references: list[tuple[int, int, str]] = []
    for path, result in results.items():
        if result.streamed is not None and result.streamed.mode == "reference":
            references += [r for r in result.streamed.references(path) if r not in references]
    *firsts, last = results
    temps: dict[str, str] = {}

    def write_all(tmp: str) -> None:
        _C.write_models(
            [(results[p].native, temps[p]) for p in firsts] + [(results[last].native, tmp)],
            data_path=temps[data],
            location=os.path.basename(data),
            progress=progress,
            references=references,
            total=progress_total,
        )

    # One native call writes every file (it lays the data out while serializing the models): the
    # other files' writers only learn their temporary names, the last model's writes them all.
    files: dict[str | os.PathLike, Callable[[str], object]] = {
        p: functools.partial(temps.__setitem__, p) for p in [data, *firsts]
    }
    files[last] = write_all
    write_atomically(files)
    # Every weight pointing into a checkpoint leaves the data file empty: it goes (see save).
    if os.path.getsize(data) == 0:
        os.remove(data)
