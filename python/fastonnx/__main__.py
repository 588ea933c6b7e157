"""python -m fastonnx: look at and check ONNX models.

python -m fastonnx inspect MODEL.onnx    inputs, outputs, opsets, op histogram, size
python -m fastonnx verify MODEL.onnx     onnx's full checker and strict shape inference, then
                                         one onnxruntime run on random inputs
python -m fastonnx export-hf DIR OUT.onnx  a transformers checkpoint directory (config.json and
                                         safetensors) exported with its weights streamed; the
                                         graph takes input_ids [1, 8] unless --dynamic;
                                         --generation: a causal LM's prefill and decode graphs
                                         (KV cache) in the directory OUT; --genai: the
                                         directory onnxruntime-genai loads (one decoder graph,
                                         genai_config.json, the tokenizer); for t5, bart and
                                         other encoder-decoders, which genai does not run,
                                         Optimum's encoder_model.onnx, decoder_model.onnx and
                                         decoder_with_past_model.onnx for onnxruntime

Each command ends with a summary of what it read or wrote. inspect and verify import no torch.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter

from .core.progress import Progress
from .core.version import __version__, check_torch


def _load(path: str):
    """The model without its tensors' data: a model of a few hundred MB whose weights are inside
    the file parses in a blink this way, where ``onnx.load`` copies every weight into Python."""
    import mmap

    import onnx

    if not os.path.exists(path):
        raise SystemExit(f"error: {path} does not exist")
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return onnx.ModelProto.FromString(_without_tensor_data(memoryview(data)))
    except Exception as e:  # noqa: BLE001 - any parse failure is the user's answer
        raise SystemExit(f"error: {path} is not a readable ONNX model: {e}") from None


# Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, and the TensorProto
# fields that hold values (float_data ... uint64_data, raw_data); external_data stays.
_MODEL_GRAPH, _GRAPH_INITIALIZER = 7, 5
_TENSOR_VALUES = {4, 5, 6, 7, 9, 10, 11}


def _without_tensor_data(data: memoryview) -> bytes:
    """The serialized ModelProto ``data`` with its graph's initializers kept but emptied of
    their values (name, dtype, dims and external data locations stay): a scan of the protobuf
    wire format that skips each weight's bytes without reading them."""
    model = bytearray()
    for number, field, payload in _fields(data):
        if number != _MODEL_GRAPH:
            model += field
            continue
        graph = bytearray()
        for inner, inner_field, tensor in _fields(payload):
            if inner != _GRAPH_INITIALIZER:
                graph += inner_field
                continue
            kept = b"".join(f for n, f, _ in _fields(tensor) if n not in _TENSOR_VALUES)
            graph += _varint_bytes(_GRAPH_INITIALIZER << 3 | 2) + _varint_bytes(len(kept)) + kept
        model += _varint_bytes(_MODEL_GRAPH << 3 | 2) + _varint_bytes(len(graph)) + graph
    return bytes(model)


def _fields(data: memoryview):
    """Each field of a serialized message: its number, its bytes (key included) and, for a
    length-delimited field, its payload."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        wire, payload = key & 7, pos
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, payload = _varint(data, pos)
            pos = payload + size
        else:
            raise ValueError(f"protobuf wire type {wire} at byte {start}")
        if pos > len(data):
            raise ValueError(f"a field at byte {start} runs past the end")
        yield key >> 3, data[start:pos], data[payload:pos]


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _type(value_info) -> str:
    import onnx

    t = value_info.type.tensor_type
    dims = [d.dim_param or str(d.dim_value) for d in t.shape.dim]
    return f"{onnx.TensorProto.DataType.Name(t.elem_type).lower()}[{', '.join(dims)}]"


def _external_bytes(model, directory: str) -> int:
    import onnx

    files = {
        e.value
        for t in model.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
        for e in t.external_data
        if e.key == "location"
    }
    return sum(os.path.getsize(os.path.join(directory, f)) for f in files if os.path.exists(os.path.join(directory, f)))


def _size(path: str, model) -> str:
    size = os.path.getsize(path)
    external = _external_bytes(model, os.path.dirname(os.path.abspath(path)))
    return f"{size / 2**20:.2f} MiB" + (f" + {external / 2**20:.2f} MiB external data" if external else "")


def _signature(model) -> list[str]:
    """The model's inputs and outputs with their types and shapes (a dynamic axis by its name),
    one line each, or one line for values of one type whose names differ in one number (a KV
    cache's layers: ``present.{0..31}.key``)."""
    g = model.graph
    initializers = {t.name for t in g.initializer}
    inputs = [(v.name, _type(v)) for v in g.input if v.name not in initializers]
    return ["inputs:", *_grouped(inputs), "outputs:", *_grouped([(v.name, _type(v)) for v in g.output])]


def _grouped(values: list[tuple[str, str]]) -> list[str]:
    groups: dict[tuple[str, str], list[list[str]]] = {}
    for name, type_ in values:
        groups.setdefault((re.sub(r"\d+", "#", name), type_), []).append(re.split(r"(\d+)", name))
    lines = []
    for (_, type_), names in groups.items():
        numbers = range(1, len(names[0]), 2)
        varying = [i for i in numbers if len({parts[i] for parts in names}) > 1]
        if len(varying) != 1:
            lines += [f"  {''.join(parts)}: {type_}" for parts in names]
            continue
        (position,) = varying
        found = [int(parts[position]) for parts in names]
        contiguous = found == list(range(found[0], found[0] + len(found)))
        listed = f"{found[0]}..{found[-1]}" if contiguous else ",".join(map(str, found))
        lines.append(f"  {''.join(names[0][:position])}{{{listed}}}{''.join(names[0][position + 1 :])}: {type_}")
    return lines


def summarize_export(paths: list[str], seconds: float, static_note: str | None) -> None:
    """What ``export-hf`` wrote: each model's path, inputs and outputs, size, and the time taken."""
    print(f"exported in {seconds:.1f} s:")
    for path in paths:
        model = _load(path)
        print(f"{path}: {len(model.graph.node)} nodes; {_size(path, model)}")
        print("\n".join(_signature(model)))
    if static_note:
        print(static_note)


def inspect_model(path: str) -> int:
    model = _load(path)
    g = model.graph
    print(f"{path}: IR version {model.ir_version}, produced by {model.producer_name} {model.producer_version}".rstrip())
    print("opsets: " + ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import))
    print("\n".join(_signature(model)))
    print(f"{len(g.node)} nodes, {len(g.initializer)} initializers; {_size(path, model)}")
    if model.functions:
        print(f"{len(model.functions)} local functions: " + ", ".join(f.name for f in model.functions))
    print("ops:")
    for op, n in Counter(n.op_type if not n.domain else f"{n.domain}::{n.op_type}" for n in g.node).most_common():
        print(f"  {n:6d}  {op}")
    return 0


def verify_model(path: str, dims: dict[str, int], seed: int) -> int:
    import numpy as np
    import onnx
    import onnxruntime as ort

    try:
        onnx.checker.check_model(path, full_check=True)
    except Exception as e:  # noqa: BLE001 - whatever the checker rejects is this command's answer
        print(f"checker: FAILED: {e}")
        return 1
    print("checker (full, with strict shape inference): ok")
    try:
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    except Exception as e:  # noqa: BLE001 - whatever keeps onnxruntime from loading it is the answer
        print(f"onnxruntime: cannot load: {e}")
        return 1
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in session.get_inputs():
        shape = []
        for d in i.shape:
            if isinstance(d, int):
                shape.append(d)
            elif d in dims:
                shape.append(dims[d])
            else:
                print(f"  dimension `{d}` of input {i.name} is dynamic; using 2 (set it with --dim {d}=N)")
                shape.append(2)
        dtype = np.dtype(ort_type_to_numpy(i.type))
        if dtype == np.bool_:
            feeds[i.name] = rng.random(shape) > 0.5
        elif np.issubdtype(dtype, np.integer):
            feeds[i.name] = rng.integers(0, 8, shape).astype(dtype)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(dtype)
    outputs = session.run(None, feeds)
    bad = 0
    for meta, out in zip(session.get_outputs(), outputs):
        finite = np.isfinite(out).all() if np.issubdtype(out.dtype, np.floating) else True
        bad += not finite
        print(f"  {meta.name}: {out.dtype}{list(out.shape)}" + ("" if finite else "  (contains NaN or inf)"))
    print("onnxruntime: ran on random inputs" + (f"; {bad} output(s) not finite" if bad else ""))
    return 0


def ort_type_to_numpy(t: str) -> str:
    name = t.removeprefix("tensor(").removesuffix(")")
    return {"float": "float32", "double": "float64", "float16": "float16"}.get(name, name)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m fastonnx", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--version", action="version", version=f"fastonnx {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("inspect", help="inputs, outputs, opsets, op histogram and size of a model")
    i.add_argument("model", help="the .onnx file (its external data is not read)")
    v = sub.add_parser("verify", help="full checker, strict shape inference and an onnxruntime run on random inputs")
    v.add_argument("model", help="the .onnx file (with its external data beside it)")
    v.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=N",
        help="size of a named dynamic dimension (default 2); repeatable",
    )
    v.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    h = sub.add_parser(
        "export-hf",
        help="export a transformers checkpoint directory, weights streamed from it",
        description="Export a transformers checkpoint directory, its weights streamed from its safetensors "
        "files. Without --dynamic the graph takes input_ids of the fixed shape [1, 8] (batch 1, 8 tokens).",
    )
    h.add_argument("checkpoint", help="directory with config.json and model.safetensors[.index.json]")
    h.add_argument("output", help="the .onnx file to write; with --generation or --genai, the directory to write")
    h.add_argument(
        "--dtype",
        choices=["float32", "float16", "bfloat16"],
        help="convert the weights to this dtype while streaming (default: the checkpoint's)",
    )
    h.add_argument(
        "--dynamic", action="store_true", help="dynamic batch and sequence length (default: input_ids [1, 8])"
    )
    h.add_argument("--reference", action="store_true", help="point into the checkpoint instead of copying weights")
    h.add_argument(
        "--generation",
        action="store_true",
        help="a causal LM's prefill and decode graphs with their KV cache, every axis dynamic, saved in the "
        "directory OUTPUT as transformers' export_for_generation saves them",
    )
    h.add_argument(
        "--genai",
        action="store_true",
        help="a causal LM as the directory onnxruntime-genai loads: one decoder graph (model.onnx) for the prompt "
        "and every later step, named past_key_values.N.key / present.N.key, its genai_config.json, and the "
        "checkpoint's tokenizer and configs; an encoder-decoder LM (t5, bart), which onnxruntime-genai does "
        "not run, as Optimum's ORTModelForSeq2SeqLM loads it: encoder_model.onnx, decoder_model.onnx and "
        "decoder_with_past_model.onnx, their weights once in model.onnx.data",
    )
    h.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="with --genai: fp32 or fp16 weights and activations, or int4/int8 weights (MatMulNBits, symmetric, "
        "blocks of 32, quantized while streaming; embeddings tied to the LM head as GatherBlockQuantized over "
        "the head's bytes) with float32 activations (--dtype float16 for float16 ones); default: the "
        "checkpoint's dtype, unquantized",
    )
    h.add_argument(
        "--quantize-embeddings",
        action="store_true",
        help="with --precision int4/int8: the token embeddings too, as GatherBlockQuantized at those bits, "
        "also where the LM head does not share them (tied ones are quantized by default)",
    )
    h.add_argument("--quiet", action="store_true", help="no progress bars or spinners (the summary is still printed)")
    return p


PRECISIONS = ("fp32", "fp16", "int8", "int4")


def _precision(p: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[str | None, str | None]:
    """export-hf's (dtype, quantize) from --dtype and --precision."""
    if args.quantize_embeddings and args.precision not in ("int4", "int8"):
        p.error("--quantize-embeddings quantizes the embeddings at --precision's bits: give --precision int4 or int8")
    if args.precision is None:
        return args.dtype, None
    if not args.genai:
        p.error("--precision applies to --genai; other exports take --dtype")
    if args.precision in ("fp32", "fp16"):
        dtype = "float32" if args.precision == "fp32" else "float16"
        if args.dtype not in (None, dtype):
            p.error(f"--precision {args.precision} and --dtype {args.dtype} disagree: give one")
        return dtype, None
    # Quantized weights with float32 activations, as onnxruntime-genai's builder writes int4 for the CPU.
    return args.dtype or "float32", args.precision


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.command == "inspect":
        return inspect_model(args.model)
    if args.command == "export-hf":
        if args.generation and args.genai:
            p.error("--generation and --genai write different directories: choose one")
        dtype, quantize = _precision(p, args)
        started = time.perf_counter()
        # Importing torch and transformers takes seconds on a busy machine: a spinner says so.
        with Progress(False if args.quiet else None).phase("importing torch"):
            try:
                check_torch()
            except ImportError as e:
                raise SystemExit(f"error: {e}") from None
            from .errors import ExportError, InternalError
            from .integrations.checkpoint import export_hf
            from .pipeline.rewrites import Quantization

        # "int4", "int8"; with --quantize-embeddings, the embeddings at the same bits
        quantization = (
            Quantization(bits=int(quantize[3:]), embedding_bits=int(quantize[3:]))
            if args.quantize_embeddings and quantize is not None
            else quantize
        )

        try:
            written = export_hf(
                args.checkpoint,
                args.output,
                dtype,
                args.dynamic,
                args.reference,
                not args.quiet,
                args.generation,
                args.genai,
                quantization,
            )
        except ExportError as e:
            if isinstance(e, InternalError):  # (a bug: its traceback goes with the report)
                raise
            # The message says what failed and what to do; fastonnx's frames add nothing to it.
            raise SystemExit(f"error: {e}") from None
        static = None
        if not (args.dynamic or args.generation or args.genai):
            static = "static shapes: input_ids is [1, 8]; --dynamic exports any batch and sequence length"
        summarize_export(written, time.perf_counter() - started, static)
        return 0
    dims = {}
    for item in args.dim:
        name, _, value = item.partition("=")
        if not value.isdigit():
            p.error(f"--dim takes NAME=N, got {item!r}")
        dims[name] = int(value)
    _load(args.model)
    return verify_model(args.model, dims, args.seed)


if __name__ == "__main__":
    sys.exit(main())
