// Whether an attention mask the graph computes is causal attention over left- or right-padded
// keys (optionally within a sliding window), established by evaluating it, not by recognising
// how it is built: the ops models build masks from vary with the architecture and the version of
// transformers, and a structural match that is almost right would be silently wrong.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fastonnx/ir.h"

namespace fastonnx {

// How a mask says "attend": a boolean that is true, or an additive float that is 0 (a masked key
// holds -inf or a large negative number).
enum class MaskKind { Boolean, Additive };

// The sizes a decoder's attention runs at, as the graph's dims: the batch and the query length
// (of the query, [B, N, S, H]) and the cached length (dim 2 of every past key and value input).
struct AttentionSizes {
  Dim batch, query;
  std::vector<Dim> past;
};

struct MaskCheck {
  std::string failure;  // empty: the mask is causal attention over the padding the input says
  int64_t window = 0;   // > 0: a query sees only keys fewer than `window` positions before it
  Value padding;        // the [batch, past + query] input the mask reads by value
  bool ok() const { return failure.empty(); }
};

// Evaluates the cone of `mask` (which must read only constants, the values of one 2-D input of
// shape [batch, past + query], the padding mask, and the sizes of other inputs) on probe inputs:
// batches with left and right padding, empty and filled past, one and several new tokens. It
// passes when on every probe the mask, of shape [1 or B, 1, S, P + S], is exactly
//   attend(b, q, k) = padding[b][k] && k <= P + q && (window == 0 || P + q - k < window).
// Probes are short (up to 13 keys): a longer window is not seen, so a fusion also applies the
// mask itself (as GroupQueryAttention's attention_bias) and relies on this check for what its
// own masking adds: causality, and the window the probes show.
MaskCheck check_causal_mask(const Graph& g, Value mask, MaskKind kind, const AttentionSizes& sizes);

}  // namespace fastonnx
