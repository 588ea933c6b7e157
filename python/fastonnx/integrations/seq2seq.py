"""An encoder-decoder language model (t5, bart) as Optimum exports it for onnxruntime, the layout
``optimum.onnxruntime.ORTModelForSeq2SeqLM.from_pretrained`` loads: three graphs, their weights
in one data file, and the checkpoint's tokenizer and configs::

    encoder_model.onnx, decoder_model.onnx, decoder_with_past_model.onnx, model.onnx.data,
    config.json, generation_config.json, tokenizer.json, ...

- ``encoder_model.onnx``: ``input_ids``, ``attention_mask [batch_size, encoder_sequence_length]``
  -> ``last_hidden_state``.
- ``decoder_model.onnx``, the first step: ``input_ids [batch_size, decoder_sequence_length]``,
  ``encoder_attention_mask``, ``encoder_hidden_states`` -> ``logits``, ``present.N.decoder.key``
  / ``.value`` (self-attention) and ``present.N.encoder.key`` / ``.value`` (the cross-attention
  keys and values, computed once from the encoder's states).
- ``decoder_with_past_model.onnx``, every later step: ``input_ids``, ``encoder_attention_mask``,
  ``past_key_values.N.decoder.*`` and ``past_key_values.N.encoder.*`` -> ``logits`` and
  ``present.N.decoder.*`` (the cross-attention cache does not change: it is not returned).

Every cache is ``[batch_size, heads, length, head_size]`` in the model's dtype; batch, the
encoder's length, the decoder's query length and its past are dynamic, named as Optimum names
them (the torch.export Dims of ``_example``): a cross-attention cache's length is
``encoder_sequence_length``, a past self-attention one's ``past_decoder_sequence_length``, a
present one's ``decoder_sequence_length`` on the first step and
``decoder_sequence_length + past_decoder_sequence_length`` after (Optimum spells the sum the other
way round); ``logits`` is ``[batch_size, decoder_sequence_length, vocab_size]``.

Why two decoder graphs rather than Optimum's ``decoder_model_merged.onnx``: that one file takes
``use_cache_branch`` and, on the first step, past tensors of length 1 filled with zeros
(``ORTDecoderForSeq2Seq.prepare_inputs_for_merged``), so which inputs count is told by the
*value* of a tensor. A graph must then branch on it (Optimum merges the two graphs above under an
``If``) or slice by it (shapes that depend on data, which torch.export traces as unbacked
sizes); a graph deciding by its inputs' shapes (an empty past) computes garbage from Optimum's
zeros. The two decoder graphs are what Optimum itself writes before merging, which
``ORTModelForSeq2SeqLM`` loads where there is no merged file (``use_merged=False``), feeding
``decoder_model.onnx`` no past at all; and they cost no weight twice: the three graphs point
into one data file where each weight's bytes are written once (``pipeline.result.save_together``).
transformers.js loads only the merged file.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import torch

from ..core.progress import Progress
from ..errors import ArgumentError, ExportError
from .output_directory import cache_argument, check_checkpoint, check_dynamic, write_directory

ENCODER = "encoder_model.onnx"
DECODER = "decoder_model.onnx"
DECODER_WITH_PAST = "decoder_with_past_model.onnx"
DATA = "model.onnx.data"
# Optimum's names of the caches (optimum/exporters/onnx/base.py, add_past_key_values).
PAST = "past_key_values.{layer}.{attention}.{kind}"
PRESENT = "present.{layer}.{attention}.{kind}"
# The example traced: no size 0 or 1 (torch.export specializes those), every length different.
_BATCH, _ENCODER_LENGTH, _QUERY, _PAST = 2, 7, 5, 3


def export_seq2seq(
    model: torch.nn.Module,
    output: str | os.PathLike,
    *,
    checkpoint: str | os.PathLike | None = None,
    dtype: torch.dtype | None = None,
    opset_version: int | None = None,
    verbose: bool | None = None,
) -> list[str]:
    """Write ``model`` (a transformers encoder-decoder LM) to the directory ``output`` as Optimum
    lays it out for onnxruntime (see the module's docstring). A model on the meta device takes its
    weights from ``checkpoint`` (a transformers checkpoint directory, streamed, converted to
    ``dtype``), which is also where the tokenizer and configs are copied from. Written to a
    temporary directory beside ``output`` and moved in at the end. Returns the paths written."""
    import transformers

    if not isinstance(model, transformers.PreTrainedModel) or not model.config.is_encoder_decoder:
        raise ArgumentError(f"{type(model).__name__} is not a transformers encoder-decoder model")
    output = os.fspath(output)
    check_checkpoint(model, output, checkpoint)
    caches = _caches(model)

    def write(scratch: str) -> None:
        _export_graphs(model, scratch, caches, checkpoint, dtype, opset_version, verbose)
        _check_graphs(scratch, caches.num_layers)
        if checkpoint is None:
            # A model exported from memory: its configs are what a checkpoint directory would hold.
            model.config.save_pretrained(scratch)
            model.generation_config.save_pretrained(scratch)

    written = write_directory(output, checkpoint, write, prefix=".fastonnx-seq2seq-")
    if verbose is not False:
        print(
            f"{model.config.model_type} is an encoder-decoder model, which onnxruntime-genai does not run: "
            f"{output} holds Optimum's layout for onnxruntime ({ENCODER}, {DECODER}, {DECODER_WITH_PAST}, "
            f"their weights once in {DATA}), as optimum.onnxruntime.ORTModelForSeq2SeqLM loads it"
        )
    return written


class _Encoder(torch.nn.Module):
    """The model's encoder: token ids and their mask to its last hidden state."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model  # named so: the checkpoint's names are the model's, under `model.`

    def forward(self, input_ids, attention_mask):
        return self.model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class _DecoderStep(torch.nn.Module):
    """One decoder step of the model's own forward: the query's ids, the encoder's mask and
    either the encoder's states (``past_layers`` 0, the first step: the cross-attention caches
    are computed and returned) or the caches of both attentions of ``past_layers`` layers, flat,
    layer by layer in Optimum's order."""

    def __init__(self, model: torch.nn.Module, past_layers: int):
        super().__init__()
        self.model = model
        self.past_layers = past_layers

    def forward(self, input_ids, encoder_attention_mask, states):
        from transformers import DynamicCache, EncoderDecoderCache
        from transformers.modeling_outputs import BaseModelOutput

        own, cross = DynamicCache(), DynamicCache()
        for i in range(self.past_layers):
            own.update(states[4 * i], states[4 * i + 1], i)
            cross.update(states[4 * i + 2], states[4 * i + 3], i)
        if self.past_layers:
            # The cross-attention reads its cache, never these states: only their shape is given.
            key = states[2]
            hidden = key.new_zeros(key.shape[0], key.shape[2], self.model.config.hidden_size)
        else:
            (hidden,) = states
        argument = cache_argument(self.model)
        out = self.model(
            attention_mask=encoder_attention_mask,
            decoder_input_ids=input_ids,
            encoder_outputs=BaseModelOutput(last_hidden_state=hidden),
            use_cache=True,
            **{argument: EncoderDecoderCache(own, cross)},
        )
        cache = getattr(out, argument)
        presents = []
        for i, layer in enumerate(cache.self_attention_cache.layers):
            presents += [layer.keys, layer.values]
            if not self.past_layers:
                crossed = cache.cross_attention_cache.layers[i]
                presents += [crossed.keys, crossed.values]
        return (out.logits, *presents)


@dataclasses.dataclass(frozen=True)
class _Caches:
    """The decoder's caches: its layers, and the heads and head size of every key and value of
    both attentions, in ``dtype``."""

    num_layers: int
    heads: int
    head_size: int
    dtype: torch.dtype


def _caches(model) -> _Caches:
    """The decoder's caches as its first step returns them, from one run on fake tensors (nothing
    is computed; the model's weights on the meta device or not)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, _ = _example(model, None, first_step=True)
        presents = _DecoderStep(model, past_layers=0)(*args)[1:]
    sizes = {(t.shape[1], t.shape[3]) for t in presents if t.dim() == 4}
    if not presents or len(presents) % 4 or len(sizes) != 1 or any(t.dim() != 4 for t in presents):
        raise ExportError(
            f"{type(model).__name__}'s decoder returns caches of shapes {[list(t.shape) for t in presents]}; "
            "Optimum's layout takes a key and a value of [batch, heads, length, head_size] for each attention of "
            "each layer, with the same heads and head size for all"
        )
    ((heads, head_size),) = sizes
    return _Caches(len(presents) // 4, heads, head_size, presents[0].dtype)


def _example(model, caches: _Caches | None, *, first_step: bool = False):
    """The traced inputs and their dynamic shapes: the encoder's (no ``caches``, not
    ``first_step``), the first decoder step's, or a later one's (``caches``)."""
    device = next(model.parameters()).device
    batch = torch.export.Dim("batch_size")
    encoder_length = torch.export.Dim("encoder_sequence_length", min=2)
    mask = torch.ones(_BATCH, _ENCODER_LENGTH, dtype=torch.long, device=device)
    if caches is None and not first_step:
        return (torch.zeros_like(mask), mask), ({0: batch, 1: encoder_length}, {0: batch, 1: encoder_length})
    states, state_shapes = [], []
    if caches is None:
        hidden = (_BATCH, _ENCODER_LENGTH, model.config.hidden_size)
        states.append(torch.zeros(hidden, dtype=next(model.parameters()).dtype, device=device))
        state_shapes.append({0: batch, 1: encoder_length})
    else:
        past = torch.export.Dim("past_decoder_sequence_length", min=1)
        for _ in range(caches.num_layers):
            # The self-attention's key and value, then the cross-attention's.
            for length, dim in [(_PAST, past)] * 2 + [(_ENCODER_LENGTH, encoder_length)] * 2:
                shape = (_BATCH, caches.heads, length, caches.head_size)
                states.append(torch.zeros(shape, dtype=caches.dtype, device=device))
                state_shapes.append({0: batch, 2: dim})
    query = torch.export.Dim("decoder_sequence_length")
    args = (torch.zeros(_BATCH, _QUERY, dtype=torch.long, device=device), mask, tuple(states))
    return args, ({0: batch, 1: query}, {0: batch, 1: encoder_length}, tuple(state_shapes))


def _cache_names(template: str, num_layers: int, attentions: tuple[str, ...]) -> list[str]:
    return [
        template.format(layer=i, attention=attention, kind=kind)
        for i in range(num_layers)
        for attention in attentions
        for kind in ("key", "value")
    ]


def _export_graphs(model, directory: str, caches: _Caches, checkpoint, dtype, opset_version, verbose) -> None:
    from ..pipeline.export import export
    from ..pipeline.result import save_together
    from ..weights.source import open_source

    layers, both = caches.num_layers, ("decoder", "encoder")
    # file: (module, the example's caches, first step, input names, output names)
    graphs = {
        ENCODER: (_Encoder(model), None, False, ["input_ids", "attention_mask"], ["last_hidden_state"]),
        DECODER: (
            _DecoderStep(model, past_layers=0),
            None,
            True,
            ["input_ids", "encoder_attention_mask", "encoder_hidden_states"],
            ["logits", *_cache_names(PRESENT, layers, both)],
        ),
        DECODER_WITH_PAST: (
            _DecoderStep(model, past_layers=layers),
            caches,
            False,
            ["input_ids", "encoder_attention_mask", *_cache_names(PAST, layers, both)],
            ["logits", *_cache_names(PRESENT, layers, ("decoder",))],
        ),
    }
    kwargs: dict = {"verbose": verbose}
    if checkpoint is not None:
        # Opened once for the three graphs: each weight is then the same mapped memory in all of
        # them, which is how save_together finds the bytes they share.
        kwargs |= {"weights": open_source(os.fspath(checkpoint)), "dtype": dtype}
    results = {}
    for filename, (module, example_caches, first_step, input_names, output_names) in graphs.items():
        args, shapes = _example(model, example_caches, first_step=first_step)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module="transformers")
            results[os.path.join(directory, filename)] = export(
                module.eval(),
                args,
                input_names=input_names,
                output_names=output_names,
                dynamic_shapes=shapes,
                opset_version=opset_version,
                **kwargs,
            )
    with Progress(verbose).stage("writing", total=None, unit="B", scale=True) as bar:
        save_together(results, os.path.join(directory, DATA), progress=bar.advance, progress_total=bar.set_total)


def _check_graphs(directory: str, num_layers: int) -> None:
    both = ("decoder", "encoder")
    encoder = {"input_ids": (0, 1), "attention_mask": (0, 1), "last_hidden_state": (0, 1)}
    step = {"input_ids": (0, 1), "encoder_attention_mask": (0, 1), "encoder_hidden_states": (0, 1), "logits": (0, 1)}
    caches = dict.fromkeys(_cache_names(PAST, num_layers, both) + _cache_names(PRESENT, num_layers, both), (0, 2))
    check_dynamic(os.path.join(directory, ENCODER), encoder)
    check_dynamic(os.path.join(directory, DECODER), step | caches)
    check_dynamic(os.path.join(directory, DECODER_WITH_PAST), step | caches)


__all__ = ["export_seq2seq"]
