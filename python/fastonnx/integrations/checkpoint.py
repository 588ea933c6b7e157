"""``python -m fastonnx export-hf``: a transformers checkpoint directory to ONNX, the model built
from its ``config.json`` on the meta device and its weights streamed from its safetensors files.
Nothing is downloaded: the directory must hold the config and the weights."""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections import Counter

import torch

from ..core.progress import Progress
from ..core.stack import warn
from ..errors import ArgumentError
from ..pipeline.rewrites import Quantization

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# The example input the trace runs: short sequences of token ids.
_EXAMPLE_TOKENS = 8


def meta_model(
    directory: str, dtype: torch.dtype, generation: bool = False, encoder_decoder: bool = False, loaded: bool = False
) -> torch.nn.Module:
    """The checkpoint's model, on the meta device, built in ``dtype`` as ``from_pretrained``
    builds it (buffers computed in float32 stay so): without its cache (a plain forward), or,
    for ``generation``, a causal LM with it, or (``encoder_decoder`` too) a seq2seq LM. With
    ``loaded``, the same model loaded with its weights (``from_pretrained``)."""
    import transformers

    if not os.path.isfile(os.path.join(directory, "config.json")):
        raise ArgumentError(f"{directory} holds no config.json: give a transformers checkpoint directory")
    config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True)
    causal = type(config) in transformers.AutoModelForCausalLM._model_mapping
    # bart is both: a seq2seq checkpoint, and a causal LM of its decoder alone.
    seq2seq = (
        encoder_decoder
        and config.is_encoder_decoder
        and type(config) in transformers.AutoModelForSeq2SeqLM._model_mapping
    )
    if generation and not (causal or seq2seq):
        accepted = "causal and encoder-decoder" if encoder_decoder else "causal"
        raise ArgumentError(
            f"{'--genai' if encoder_decoder else '--generation'} exports {accepted} language models; "
            f"{directory}'s config is a {type(config).__name__}, which transformers' AutoModelForCausalLM "
            f"{'and AutoModelForSeq2SeqLM do' if encoder_decoder else 'does'} not build"
        )
    config.use_cache = generation
    auto = (
        transformers.AutoModelForSeq2SeqLM
        if seq2seq
        else transformers.AutoModelForCausalLM
        if causal
        else transformers.AutoModel
    )
    if loaded:
        return auto.from_pretrained(directory, config=config, dtype=dtype, local_files_only=True).eval()
    with torch.device("meta"):
        return auto.from_config(config, dtype=dtype).eval()


def stored_dtype(directory: str) -> torch.dtype:
    """The dtype most of the checkpoint's floating weights have (by bytes)."""
    from ..weights.source import open_source

    checkpoint = open_source(directory)
    by_dtype: Counter = Counter()
    for name in checkpoint.tensors:
        dtype, shape = checkpoint.meta(name)
        if dtype.is_floating_point:
            by_dtype[dtype] += dtype.itemsize * math.prod(shape)
    return by_dtype.most_common(1)[0][0] if by_dtype else torch.float32


def export_hf(
    directory: str,
    output: str,
    dtype: str | None,
    dynamic: bool,
    reference: bool,
    verbose: bool,
    generation: bool = False,
    genai: bool = False,
    quantize: str | Quantization | None = None,
) -> list[str]:
    """Without ``dtype``, the model takes the checkpoint's dtype (config.json may say another).
    With ``generation``, ``output`` is a directory (see ``export_for_generation``); with ``genai``,
    the directory onnxruntime-genai loads (``genai.export_genai``), or for an encoder-decoder
    model Optimum's layout for onnxruntime (``seq2seq.export_seq2seq``). Returns the paths of the
    models written. ``quantize`` ("int4", "int8" or a ``Quantization``; ``genai`` only) writes the
    decoder's Linear weights as MatMulNBits. A model whose forward makes tensors on the meta device (their values
    lost) is loaded with its weights and exported again, with a warning."""
    progress = Progress(None if verbose else False)
    with progress.phase("building the model from config.json"):
        target = DTYPES[dtype] if dtype else stored_dtype(directory)
        model = meta_model(directory, target, generation or genai, encoder_decoder=genai)
    try:
        return _export_model(model, directory, output, target, dynamic, reference, verbose, generation, genai, quantize)
    except ArgumentError as e:
        lost = getattr(e, "constants_without_values", None)
        if not lost:
            raise
        size = sum(
            os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if f.endswith(".safetensors")
        )
        warn(
            f"the model's forward makes tensors from Python values ({', '.join(f'`{n}`' for n in lost)}: a list "
            "used as an index, torch.tensor(...)), which have no value on the meta device: it is loaded with its "
            f"weights (about {size / 2**30:.1f} GiB in memory) and exported from memory",
            UserWarning,
        )
    with progress.phase("loading the model with its weights"):
        model = meta_model(directory, target, generation or genai, encoder_decoder=genai, loaded=True)
    return _export_model(model, directory, output, target, dynamic, reference, verbose, generation, genai, quantize)


def _export_model(
    model, directory, output, target, dynamic, reference, verbose, generation, genai, quantize
) -> list[str]:
    from ..pipeline.export import export

    if genai:
        if reference:
            raise ArgumentError(
                "--genai writes a directory onnxruntime-genai loads on its own, with the weights in it: "
                "--reference does not apply"
            )
        from .genai import export_genai

        written = export_genai(
            model,
            output,
            checkpoint=directory,
            dtype=target,
            verbose=None if verbose else False,
            quantize=quantize,
        )
        return [path for path in written if path.endswith(".onnx")]
    if generation:
        export_for_generation(model, directory, output, target, reference, verbose)
        return sorted(os.path.join(output, f) for f in os.listdir(output) if f.endswith(".onnx"))
    # A batch of 2 when it is dynamic: torch.export specializes a size of 1.
    ids = torch.zeros(2 if dynamic else 1, _EXAMPLE_TOKENS, dtype=torch.long)
    export(
        model,
        (ids,),
        output,
        input_names=["input_ids"],
        dynamic_axes={"input_ids": {0: "batch", 1: "sequence"}} if dynamic else None,
        weights=directory,
        weights_mode="reference" if reference else "copy",
        dtype=target,
        verbose=None if verbose else False,
    )
    return [output]


def export_for_generation(
    model: torch.nn.Module, directory: str, output: str, dtype: torch.dtype, reference: bool, verbose: bool
) -> None:
    """The prefill and decode graphs of transformers' ``export_for_generation``
    (``integrations/transformers.py``), traced on the meta device with every axis dynamic,
    their weights streamed from the checkpoint; saved by transformers' ``save_pretrained`` in
    the directory ``output`` (prefill.onnx, decode.onnx, each with its .data, export.json and
    the configs), which its ONNX Runtime runner loads."""
    if reference:
        raise ArgumentError(
            "--generation writes each graph with its own copy of the weights (transformers saves the graphs it "
            "exported elsewhere): --reference does not apply"
        )
    from transformers.exporters import OnnxConfig

    from .transformers import FastOnnxExporter

    # A batch of 2 and a prompt of several tokens: torch.export specializes a size of 1.
    ids = torch.zeros(2, _EXAMPLE_TOKENS, dtype=torch.long)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    exporter = FastOnnxExporter(weights=directory, dtype=dtype, verbose=None if verbose else False)
    with _without_dynamic_shapes_advice():
        exported = exporter.export_for_generation(model, inputs, OnnxConfig(dynamic=True))
    # transformers copies each graph's weights from where the export wrote them.
    with Progress(None if verbose else False).phase(f"saving into {output}"):
        exported.save_pretrained(output)


@contextlib.contextmanager
def _without_dynamic_shapes_advice():
    """transformers advises explicit ``dynamic_shapes`` over ``dynamic=True`` (faster traces): a
    Python caller's choice, which a user of the command line cannot act on."""
    import transformers.exporters.exporter_dynamo as exporter_dynamo

    logger = logging.getLogger(exporter_dynamo.__file__)  # transformers names that module's logger so
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
