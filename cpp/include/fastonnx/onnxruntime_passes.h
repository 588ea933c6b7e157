// Rewrites for onnxruntime (export(optimize_for="onnxruntime"), quantize=): its com.microsoft
// fused ops in place of the standard-ONNX patterns they compute, and weight-only quantization.
// Each pass matches on the graph and leaves plain ONNX wherever a pattern does not match
// exactly, saying why in the report. They run after the clean-up passes (passes.h), append the
// nodes they make, and leave the re-sorting to the caller (sort_nodes).
#pragma once

#include <cstdint>
#include <string>

#include "fastonnx/ir.h"
#include "fastonnx/rewrite.h"

namespace fastonnx {

inline constexpr std::string_view kMicrosoftDomain = "com.microsoft";

// RMSNorm -> SimplifiedLayerNormalization, a residual Add then RMSNorm ->
// SkipSimplifiedLayerNormalization; LayerNormalization after a residual Add ->
// SkipLayerNormalization (fuse_norms.cpp).
void fuse_norms(Graph& g, int opset, RewriteReport& report);

// GELU written out in elementwise ops (erf or the tanh approximation, in any order of its
// factors) -> com.microsoft Gelu / FastGelu (fuse_gelu.cpp).
void fuse_gelu(Graph& g, RewriteReport& report);

// Attention (sdpa and eager, with grouped KV heads, causal and sliding-window masks, rotary
// before it) -> GroupQueryAttention (fuse_attention.cpp).
struct AttentionOptions {
  // Each fused attention's past and present may also be one buffer, longer than the past
  // (onnxruntime-genai's past_present_share_buffer, which GroupQueryAttention detects by the two
  // being the same memory). Wherever the graph reads a past input's length, it then reads the
  // padding mask's width minus the query length instead, which is the same for every valid input
  // (the mask covers the past and the query). An attention whose cache cannot be shared (its past
  // or present is read by other nodes) is said in the report; "shared KV cache" counts the others.
  bool share_cache = false;
  // > 0: rotary embedding of q and k (x * cos + rotate_half(x) * sin, cos and sin computed from a
  // position input alone) becomes com.microsoft RotaryEmbedding over tables of this many
  // positions, evaluated from the graph's own cos and sin; 0 leaves it as it is.
  int64_t rotary_positions = 0;
};
void fuse_attention(Graph& g, const AttentionOptions& options, RewriteReport& report);

// Weight-only quantization of MatMul weights (quantize_weights.cpp), written as onnxruntime's
// MatMulNBits, or as standard ONNX: int4 or int8 values, a blocked DequantizeLinear (opset 21)
// and the MatMul or Gemm reading it, which onnxruntime fuses into MatMulNBits itself.
enum class QuantizedForm : uint8_t { MatMulNBits, DequantizeLinear };
struct QuantizeOptions {
  int bits = 0;                // 4 or 8; 0: none
  int64_t block_size = 32;     // elements along K per scale
  int64_t accuracy_level = 0;  // MatMulNBits' accuracy_level (0: unset, 4: int8 activations)
  int head_bits = -1;          // the LM head's (the MatMul that writes a graph output); -1: as `bits`, 0: unquantized
  // The token embeddings' Gather as com.microsoft GatherBlockQuantized: 4 or 8; 0: left float;
  // -1: as the LM head where the head reads the same table (tied), else left float.
  int embedding_bits = -1;
  QuantizedForm form = QuantizedForm::MatMulNBits;
};
// The form DequantizeLinear needs `opset` 21 or later (its block_size, int4).
void quantize_weights(Graph& g, int opset, const QuantizeOptions& options, RewriteReport& report);

// MatMulNBits nodes reading the same activations (Q, K and V; gate and up) as one over their
// weights stacked along N, then a Split; the same for float MatMuls over constant weights
// (pack_matmuls.cpp).
void pack_matmuls(Graph& g, RewriteReport& report);

}  // namespace fastonnx
