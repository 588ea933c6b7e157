"""export()'s ``optimize_for`` and ``quantize``: onnxruntime's fused ops and weight-only
quantization, done by the native passes after the clean-up (``_C.Session.finish``). Plain,
standard ONNX stays the default; each is asked for by name."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ArgumentError

# "onnxruntime": its fused ops. "onnxruntime-genai": the same, and each fused attention's KV cache
# may be the one buffer onnxruntime-genai shares between past and present
# (past_present_share_buffer): the graph then reads the past's length from the attention mask's
# width, which is the same for every valid input, and not from the past, which is max_length long.
OPTIMIZE_TARGETS = ("onnxruntime", "onnxruntime-genai")
# The block sizes onnxruntime's MatMulNBits kernels take (powers of two).
BLOCK_SIZES = (16, 32, 64, 128, 256)
# How quantized weights are written: onnxruntime's com.microsoft MatMulNBits, or standard ONNX
# (opset 21's blocked DequantizeLinear of int4 or int8 values, read by the MatMul).
QUANTIZED_FORMS = ("MatMulNBits", "DequantizeLinear")
# Blocked DequantizeLinear and the int4 type came with opset 21.
MIN_DEQUANTIZE_LINEAR_OPSET = 21


@dataclass(frozen=True)
class Quantization:
    """Weight-only, symmetric, round-to-nearest quantization of MatMul weights, along K in blocks
    of ``block_size``: in each block ``m`` is the weight of largest magnitude (its sign kept),
    ``s = m / -2**(bits-1)`` rounded to the activations' dtype, and
    ``q = clamp(round_half_even(w * (1 / s)), -2**(bits-1), 2**(bits-1) - 1)`` (in float32, the
    reciprocal once per block, as onnxruntime's own block quantizer computes it; ``w / s`` can round
    otherwise at a tie), stored as ``q + 2**(bits-1)`` (MatMulNBits) or as ``q`` (DequantizeLinear):
    ``m`` maps exactly to the lowest level, so all ``2**bits`` are used (README, "Files for
    onnxruntime"). A weight streamed with ``dtype=`` is rounded to it first.

    ``form``: how the weights are written. ``"MatMulNBits"`` (the default): onnxruntime's
    com.microsoft MatMulNBits (what onnxruntime-genai runs). ``"DequantizeLinear"``: standard ONNX,
    for any runtime, which needs ``opset_version`` 21 or more: q itself (no zero point) as an
    int4 (or int8) initializer of MatMul's [K, N] layout, its scales [ceil(K / block_size), N] and
    ``DequantizeLinear(axis=0, block_size=block_size)`` feeding the MatMul (a Gemm's B, its bias
    kept); onnxruntime fuses each into a MatMulNBits of the same values when it loads the file.
    ``block_size`` is one MatMulNBits' kernels take (16 to 256).
    ``accuracy_level``: MatMulNBits' (0 unset, 1 fp32, 2 fp16, 3 bf16, 4 int8 activations). The
    default, 4, is what onnxruntime-genai's builder writes for the CPU: onnxruntime quantizes each
    block of activations to int8 inside the op, which decodes about 3× faster than 0 there; 0
    computes with the dequantized weights exactly. The DequantizeLinear form has no such
    attribute: onnxruntime's fusion takes the session option
    ``session.qdq_matmulnbits_accuracy_level`` (4 unless set).
    ``head_bits``: the LM head's (a MatMul writing a graph output): None as ``bits``, 0 to keep it
    unquantized, or 8.
    ``embedding_bits``: the token embeddings' (a Gather from a constant table whose ids are a graph
    input and whose rows are as many as a graph output is wide: the vocabulary), written as
    com.microsoft GatherBlockQuantized over the same blocks: None (the default) as the LM head
    where the head reads the same table (tied; the file then holds its bytes once, as
    onnxruntime-genai's builder writes a tied model), else float; 0 float; 4 or 8. The
    DequantizeLinear form (standard ONNX only) keeps them float."""

    bits: int = 4
    block_size: int = 32
    accuracy_level: int = 4
    head_bits: int | None = None
    embedding_bits: int | None = None
    form: str = "MatMulNBits"

    def __post_init__(self) -> None:
        if self.bits not in (4, 8):
            raise ArgumentError(f"quantize: bits is 4 or 8, got {self.bits!r}")
        if self.block_size not in BLOCK_SIZES:
            raise ArgumentError(
                f"quantize: block_size is one of {', '.join(map(str, BLOCK_SIZES))}, got {self.block_size!r}"
            )
        if self.accuracy_level not in (0, 1, 2, 3, 4):
            raise ArgumentError(f"quantize: accuracy_level is 0 to 4, got {self.accuracy_level!r}")
        if self.head_bits not in (None, 0, 4, 8):
            raise ArgumentError(
                f"quantize: head_bits is None (as bits), 0 (unquantized), 4 or 8, got {self.head_bits!r}"
            )
        if isinstance(self.embedding_bits, bool) or self.embedding_bits not in (None, 0, 4, 8):
            raise ArgumentError(
                f"quantize: embedding_bits is None (as a tied LM head), 0 (unquantized), 4 or 8, "
                f"got {self.embedding_bits!r}"
            )
        if self.form not in QUANTIZED_FORMS:
            raise ArgumentError(f"quantize: form is one of {', '.join(map(repr, QUANTIZED_FORMS))}, got {self.form!r}")
        if self.form == "DequantizeLinear" and self.embedding_bits:
            raise ArgumentError(
                f"quantize: embedding_bits={self.embedding_bits} writes com.microsoft GatherBlockQuantized, which "
                "form='DequantizeLinear' (standard ONNX only) does not write: leave embedding_bits None or 0"
            )

    def check_opset(self, opset: int) -> None:
        """The DequantizeLinear form needs opset 21 (blocked DequantizeLinear, int4); an older opset is an
        error, never raised behind the user's back."""
        if self.form == "DequantizeLinear" and opset < MIN_DEQUANTIZE_LINEAR_OPSET:
            raise ArgumentError(
                f"quantize: form='DequantizeLinear' writes a blocked DequantizeLinear of int4 or int8 values, which "
                f"ONNX has from opset {MIN_DEQUANTIZE_LINEAR_OPSET}; this export's opset is {opset}: pass "
                f"opset_version={MIN_DEQUANTIZE_LINEAR_OPSET} or more"
            )

    @classmethod
    def parse(cls, value: object) -> Quantization | None:
        """``quantize=``: None, ``"int4"``/``"int8"``, or a ``Quantization``."""
        if value is None or isinstance(value, Quantization):
            return value
        if value in ("int4", "int8"):
            return cls(bits=int(str(value)[3:]))
        raise ArgumentError(f"quantize is None, 'int4', 'int8' or a fastonnx.Quantization, got {value!r}")


def check_optimize_for(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) and value in OPTIMIZE_TARGETS:
        return value
    raise ArgumentError(f"optimize_for is None (standard ONNX) or one of {', '.join(OPTIMIZE_TARGETS)}, got {value!r}")


def check_max_positions(value: object, optimize_for: str | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ArgumentError(f"max_positions is None or a positive int (the longest position served), got {value!r}")
    if optimize_for is None:
        raise ArgumentError(
            "max_positions sizes the tables of onnxruntime's RotaryEmbedding, which optimize_for writes: "
            "pass optimize_for='onnxruntime' too, or drop max_positions"
        )
    return value


def finish_arguments(optimize_for: str | None, quantization: Quantization | None, max_positions: int | None) -> dict:
    """The keyword arguments of ``_C.Session.finish`` for these options."""
    fusions = {
        "fuse_for_onnxruntime": optimize_for is not None,
        "share_kv_cache": optimize_for == "onnxruntime-genai",
        "rotary_positions": max_positions or 0,
    }
    if quantization is None:
        return fusions
    head = quantization.bits if quantization.head_bits is None else quantization.head_bits
    return fusions | {
        "quantize_bits": quantization.bits,
        "block_size": quantization.block_size,
        "accuracy_level": quantization.accuracy_level,
        "head_bits": head,
        "embedding_bits": -1 if quantization.embedding_bits is None else quantization.embedding_bits,
        "dequantize_linear": quantization.form == "DequantizeLinear",
    }
