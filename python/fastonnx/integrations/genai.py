"""A causal language model as the directory onnxruntime-genai loads: one decoder graph that runs
the prompt (an empty past) and every later step, named as onnxruntime-genai, Optimum and
transformers.js name it, its ``genai_config.json``, and the checkpoint's tokenizer and configs::

    model.onnx, model.onnx.data, genai_config.json, config.json, tokenizer.json, ...

The graph takes ``input_ids [batch_size, sequence_length]``, ``attention_mask [batch_size,
total_sequence_length]``, ``position_ids [batch_size, sequence_length]`` (where the model's forward
takes them) and ``past_key_values.N.key`` / ``.value [batch_size, kv_heads,
past_sequence_length, head_size]``, and returns ``logits [batch_size, sequence_length,
vocab_size]`` and ``present.N.key`` / ``.value [batch_size, kv_heads, total_sequence_length,
head_size]`` (the past and the new positions), the cache in the model's dtype: the dimension
names of onnxruntime-genai's builder. Batch, query length and past length are dynamic: a prompt,
one token, or several at once (speculative decoding).

The trace is transformers' own (``FastOnnxExporter.trace``: its export patches and cache
pytrees) on a step with a past, so no size is 0 or 1 when torch.export sees it (it would make
them static); batch, query and past are named ``torch.export.Dim`` objects, so torch.export fails
rather than fix one, and ``export``'s ``dynamic_axes`` names the program's axes in the file
(an axis the program has static would be an error). Every layer's past has one Dim, but
torch.export makes a symbol per input and unifies equal Dims only at the end, skipping a pair
that a guard of the trace already implies (in a LLaMA, layer 0's value and layer 1's key, through
the attention's shapes): those keep symbols of their own, which the file gives the one name
``past_sequence_length``, as the runtime feeds one length. The mask's width is a size of its own
in the trace (a Dim cannot be a sum of two); it and the presents' ``past + query`` are
``total_sequence_length``, equal for every input the runtime feeds. The past is a plain
``DynamicCache`` whatever cache the model builds for itself: a sliding-window layer keeps all its
past, and the model's sliding-window mask does what the cache's cropping would (the present
grows by the query length on every layer, which is what genai's cache expects).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import re
import warnings

import torch

from ..core.progress import Progress
from ..core.stack import warn
from ..errors import ArgumentError, ExportError
from ..pipeline.rewrites import Quantization
from .genai_config import DecoderSignature, context_length, genai_config
from .output_directory import cache_argument, check_checkpoint, write_directory

FILENAME = "model.onnx"
# The names onnxruntime-genai's builder, Optimum and transformers.js give the graph's values.
PAST = "past_key_values.%d.{kind}"
PRESENT = "present.%d.{kind}"
# ... and the builder's names of their dynamic axes (total_sequence_length: the past and the query).
BATCH, QUERY, PAST_LENGTH, TOTAL = "batch_size", "sequence_length", "past_sequence_length", "total_sequence_length"
_TOKENS = {0: BATCH, 1: QUERY}
_AXES = {"input_ids": _TOKENS, "attention_mask": {0: BATCH, 1: TOTAL}, "position_ids": _TOKENS, "logits": _TOKENS}
# The example step traced: no size 0 or 1 (torch.export specializes those), the query length,
# the past and the batch all different.
_BATCH, _QUERY, _PAST = 2, 5, 3
_CACHE_LEAF = re.compile(r"(?:^|\.)layers\.(\d+)\.(keys|values)$")


def export_genai(
    model: torch.nn.Module,
    output: str | os.PathLike,
    *,
    checkpoint: str | os.PathLike | None = None,
    dtype: torch.dtype | None = None,
    opset_version: int | None = None,
    verbose: bool | None = None,
    optimize_for: str | None = "onnxruntime-genai",
    quantize: str | Quantization | None = None,
) -> list[str]:
    """Write ``model`` (a transformers causal LM) to the directory ``output`` as onnxruntime-genai
    loads it (see the module's docstring). A model on the meta device takes its weights from
    ``checkpoint`` (a transformers checkpoint directory, streamed, converted to ``dtype``), which
    is also where the tokenizer and configs are copied from. Files are written to a temporary
    directory beside ``output`` and moved in at the end: an export that fails writes nothing.
    An encoder-decoder model (t5, bart), which onnxruntime-genai does not run, is written as
    Optimum lays it out for onnxruntime instead (``seq2seq.export_seq2seq``). ``optimize_for`` and
    ``quantize`` are export()'s: by default ("onnxruntime-genai") the decoder gets onnxruntime's fused
    ops where its graph matches them exactly, and when every layer's attention is fused its KV cache
    is the one buffer genai shares between past and present (``past_present_share_buffer``), appended
    to in place; ``quantize="int4"`` writes its Linear weights as MatMulNBits, quantized as they
    stream (embeddings tied to the LM head as GatherBlockQuantized over the head's bytes; see
    ``Quantization.embedding_bits``). Returns the paths written."""
    import transformers

    if not isinstance(model, transformers.PreTrainedModel) or not model.can_generate():
        raise ArgumentError(
            f"onnxruntime-genai runs causal language models; {type(model).__name__} is not a transformers "
            "model that generates"
        )
    output = os.fspath(output)
    # onnxruntime-genai runs no encoder-decoder text model: those get Optimum's layout, for onnxruntime.
    if model.config.is_encoder_decoder:
        from .seq2seq import export_seq2seq

        if quantize is not None:
            raise ArgumentError("quantize applies to the decoder graph onnxruntime-genai runs, not to t5 or bart")
        return export_seq2seq(
            model, output, checkpoint=checkpoint, dtype=dtype, opset_version=opset_version, verbose=verbose
        )
    check_checkpoint(model, output, checkpoint)
    with Progress(verbose).phase("running the model once for its cache's layout"):
        layers = _cache_layout(model)
    if layers[0][2] == torch.bfloat16:
        warn(
            "a bfloat16 model: onnxruntime's CPU provider has no bfloat16 kernels for most ops (Mul, MatMul...), so "
            "onnxruntime-genai runs this directory on CUDA only; export with dtype float16 or float32 for the CPU",
            UserWarning,
        )

    context = _context_length(model)

    def write(scratch: str) -> None:
        signature = _export_decoder(
            model,
            layers,
            os.path.join(scratch, FILENAME),
            checkpoint,
            dtype,
            opset_version,
            verbose,
            # genai's max_length is the context: the rotary tables cover every position it feeds.
            {"optimize_for": optimize_for, "quantize": quantize} | ({"max_positions": context} if optimize_for else {}),
        )
        _write_config(model, checkpoint, signature, scratch, context)

    return write_directory(output, checkpoint, write, prefix=".fastonnx-genai-")


def _cache_layout(model) -> list[tuple[torch.Size, torch.Size, torch.dtype]]:
    """Each layer's key and value shapes (batch 1, past 2) and dtype, from one forward on fake
    tensors (the model's weights on the meta device or not): nothing is computed, and transformers
    skips the checks that read values (padding in the ids, an all-ones mask) on fake tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    device = next(model.parameters()).device
    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = torch.zeros(1, 2, dtype=torch.long, device=device)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
    # transformers 5.24 calls the output's cache `cache` (`past_key_values` still works, with a warning).
    # (The old name is read only when the new one is absent: reading it warns.)
    cache = out["cache"] if "cache" in out else out.get("past_key_values")
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        raise ExportError(
            f"{type(model).__name__} returns a {type(cache).__name__}, not a cache of keys and values per layer: "
            "onnxruntime-genai's decoder takes past_key_values.N.key/value only"
        )
    found = [(layer.keys.shape, layer.values.shape, layer.keys.dtype) for layer in layers]
    for i, (key, value, _) in enumerate(found):
        if len(key) != 4 or len(value) != 4 or key[:3] != value[:3] or key[2] != 2:
            raise ExportError(
                f"layer {i}'s cache is keys {list(key)} and values {list(value)} after 2 tokens; onnxruntime-genai "
                "takes [batch, kv_heads, past, head_size] for each"
            )
    return found


def _example_step(model, layers, device):
    """The traced step's inputs (a past of _PAST positions, a query of _QUERY) and their dynamic
    shapes, by transformers' flattening of the cache."""
    from transformers import DynamicCache
    from transformers.exporters.exporter_dynamo import get_auto_dynamic_shapes, register_cache_pytrees_for_model

    batch, query, past = torch.export.Dim(BATCH), torch.export.Dim(QUERY), torch.export.Dim(PAST_LENGTH)
    total = _PAST + _QUERY
    inputs = {
        "input_ids": torch.zeros(_BATCH, _QUERY, dtype=torch.long, device=device),
        # The mask covers the past and the query: torch.export relates its length to theirs.
        "attention_mask": torch.ones(_BATCH, total, dtype=torch.long, device=device),
    }
    shapes = {"input_ids": {0: batch, 1: query}, "attention_mask": {0: batch, 1: torch.export.Dim.DYNAMIC}}
    if "position_ids" in inspect.signature(model.forward).parameters:
        inputs["position_ids"] = torch.arange(_PAST, total, device=device).expand(_BATCH, _QUERY)
        shapes["position_ids"] = {0: batch, 1: query}
    cache = DynamicCache()
    for i, (key, value, dtype) in enumerate(layers):
        cache.update(
            torch.zeros(_BATCH, key[1], _PAST, key[3], dtype=dtype, device=device),
            torch.zeros(_BATCH, value[1], _PAST, value[3], dtype=dtype, device=device),
            i,
        )
    argument = cache_argument(model)
    inputs[argument] = cache
    register_cache_pytrees_for_model(model)
    shapes[argument] = torch.utils._pytree.tree_map(
        lambda spec: {0: batch, 2: past}, get_auto_dynamic_shapes(cache), is_leaf=lambda x: isinstance(x, dict)
    )
    return inputs, shapes


def _export_decoder(model, layers, path, checkpoint, dtype, opset_version, verbose, rewrites) -> DecoderSignature:
    from transformers.exporters import OnnxConfig

    from ..pipeline.export import export
    from ..weights.source import open_source, reading_ahead
    from .transformers import FastOnnxExporter

    device = next(model.parameters()).device
    inputs, shapes = _example_step(model, layers, device)
    kwargs = {"verbose": verbose}
    reading: contextlib.AbstractContextManager = contextlib.nullcontext()
    if checkpoint is not None:
        # Opened (its files mapped) once, for the read below and for the export's writer.
        opened = open_source(os.fspath(checkpoint))
        kwargs |= {"weights": opened, "dtype": dtype}
        # The checkpoint is read while the model is traced and converted (its weights in the
        # page cache when the writer comes to them): on an 8B model, seconds of an idle disk.
        reading = reading_ahead(model, opened)
    with reading:
        with warnings.catch_warnings():
            # transformers' note that it checks no versions beyond the ones it tested
            warnings.filterwarnings("ignore", module="transformers")
            traced = FastOnnxExporter(**kwargs).trace(model, inputs, OnnxConfig(dynamic_shapes=shapes))
        input_names = [_genai_name(name, PAST, "input") for name in traced.input_names]
        output_names = [_genai_name(name, PRESENT, "output") for name in traced.output_names]
        if "logits" not in output_names:
            raise ExportError(f"{type(model).__name__} returned {traced.output_names}: no logits")
        axes = _dynamic_axes(len(layers))
        result = export(
            traced.program,
            (),
            path,
            input_names=input_names,
            output_names=output_names,
            opset_version=opset_version,
            # The program's dynamic axes (the Dims of _example_step) named as the runtime names
            # them; one the trace made static would be an error.
            dynamic_axes={name: axes[name] for name in input_names + output_names},
            external_data=True,
            **rewrites,
            **traced.export_kwargs,
        )
    key = layers[0][0]
    roles = {"input_ids": "input_ids", "attention_mask": "attention_mask", "position_ids": "position_ids"}
    return DecoderSignature(
        filename=FILENAME,
        inputs={role: name for role, name in roles.items() if name in input_names}
        | {"past_key_names": PAST.format(kind="key"), "past_value_names": PAST.format(kind="value")},
        outputs={
            "logits": "logits",
            "present_key_names": PRESENT.format(kind="key"),
            "present_value_names": PRESENT.format(kind="value"),
        },
        num_hidden_layers=len(layers),
        num_key_value_heads=key[1],
        head_size=key[3],
        # genai's flag is for every layer: one attention left plain concatenates its cache.
        shares_kv_buffer=dict(result.rewrites["counts"]).get("shared KV cache", 0) == len(layers),
    )


def _genai_name(name: str, template: str, side: str) -> str:
    """transformers' name for a graph value (``past_key_values.layers.0.keys``,
    ``input.cache.layers.0.keys``) as genai's (``past_key_values.0.key``)."""
    name = name.removeprefix(f"{side}.")
    found = _CACHE_LEAF.search(name)
    if found is not None:
        return template.format(kind=found.group(2)[:-1]) % int(found.group(1))
    if name in ("input_ids", "attention_mask", "position_ids", "logits"):
        return name
    raise ExportError(f"the decoder's {side} `{name}` is not one onnxruntime-genai feeds or reads")


def _dynamic_axes(num_layers: int) -> dict[str, dict[int, str]]:
    """Every graph input's and output's dynamic axes, by name, and their names."""
    axes = dict(_AXES)
    for i in range(num_layers):
        for kind in ("key", "value"):
            axes[PAST.format(kind=kind) % i] = {0: BATCH, 2: PAST_LENGTH}
            axes[PRESENT.format(kind=kind) % i] = {0: BATCH, 2: TOTAL}
    return axes


def _context_length(model) -> int:
    context = context_length(model.config)
    if context is None:
        context = 4096
        warn(
            f"{model.config.model_type}'s config gives no maximum sequence length; genai_config.json's "
            f"context_length and max_length are {context}: edit them for longer sequences",
            UserWarning,
        )
    return context


def _write_config(model, checkpoint, signature: DecoderSignature, directory: str, context: int) -> None:
    import transformers

    generation = model.generation_config
    if checkpoint is not None and os.path.isfile(os.path.join(checkpoint, "generation_config.json")):
        generation = transformers.GenerationConfig.from_pretrained(checkpoint, local_files_only=True)
    document = genai_config(model.config, generation, signature, context)
    with open(os.path.join(directory, "genai_config.json"), "w") as f:
        json.dump(document, f, indent=4)
        f.write("\n")
    if checkpoint is None:
        # A model exported from memory: its configs are what a checkpoint directory would hold.
        model.config.save_pretrained(directory)
        generation.save_pretrained(directory)
