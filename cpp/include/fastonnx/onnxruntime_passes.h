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

// Attention (sdpa and eager, with grouped KV heads, causal and sliding-window masks, rotary
// before it) -> GroupQueryAttention (fuse_attention.cpp).
void fuse_attention(Graph& g, RewriteReport& report);

// Weight-only quantization of MatMul weights as MatMulNBits (quantize_weights.cpp).
struct QuantizeOptions {
  int bits = 0;                // 4 or 8; 0: none
  int64_t block_size = 32;     // elements along K per scale
  int64_t accuracy_level = 0;  // MatMulNBits' accuracy_level (0: unset, 4: int8 activations)
  int head_bits = -1;          // the LM head's (the MatMul that writes a graph output); -1: as `bits`, 0: unquantized
};
void quantize_weights(Graph& g, const QuantizeOptions& options, RewriteReport& report);

// MatMulNBits nodes reading the same activations (Q, K and V; gate and up) as one over their
// weights stacked along N, then a Split (pack_matmuls.cpp).
void pack_quantized_matmuls(Graph& g, RewriteReport& report);

}  // namespace fastonnx
