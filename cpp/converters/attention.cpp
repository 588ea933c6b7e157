// Scaled dot-product attention: softmax(q @ k^T * scale + mask) @ v over the last two dims, with
// torch's conventions: a bool mask keeps where true, a float mask is added, is_causal keeps the
// lower triangle aligned at the top left, and a row that masks every key gives zeros.
#include <cmath>
#include <limits>
#include <string>

#include "common.h"

namespace fastonnx {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// The size of dim `dim` (negative: from the end) of a tensor whose shape is known.
int64_t static_dim(Builder& b, Value x, int64_t dim, const char* what) {
  const auto shape = b.shape(x);
  const Dim& d = shape[static_cast<size_t>(wrap_dim(b, dim, static_cast<int64_t>(shape.size())))];
  if (!d.is_static()) b.fail(std::string("scaled_dot_product_attention needs a static ") + what);
  return d.value;
}

// The size of dim `dim` of `x` as a 0-d int64 value (static or not).
Value dim_size(Builder& b, Value x, int64_t dim) {
  return b.op("Gather", {b.op("Shape", {x}), b.scalar(dim, ScalarType::Long)});
}

// True where query i may attend to key j: j <= i (torch's tril over (L, S)).
Value causal_mask(Builder& b, Value query, Value key) {
  const Value zero = b.scalar(int64_t{0}, ScalarType::Long), one = b.scalar(int64_t{1}, ScalarType::Long);
  const Value rows = b.op("Range", {zero, dim_size(b, query, -2), one});
  const Value cols = b.op("Range", {zero, dim_size(b, key, -2), one});
  return b.op("GreaterOrEqual", {b.op("Unsqueeze", {rows, b.ints(std::vector<int64_t>{1})}), cols});
}

// enable_gqa: each of the key's heads (dim -3) serves query_heads / key_heads query heads in a
// row (torch's repeat_interleave).
Value repeat_heads(Builder& b, Value kv, int64_t query_heads) {
  const auto shape = b.static_shape(kv);
  if (!shape || shape->size() < 3) b.fail("scaled_dot_product_attention with enable_gqa needs static key/value shapes");
  const int64_t rank = static_cast<int64_t>(shape->size());
  const int64_t heads = (*shape)[rank - 3];
  if (heads == query_heads) return kv;
  if (heads == 0 || query_heads % heads != 0) {
    b.fail("enable_gqa needs the query's head count to be a multiple of the key's (" + std::to_string(query_heads) +
           " vs " + std::to_string(heads) + ")");
  }
  std::vector<int64_t> expanded(*shape);
  expanded.insert(expanded.end() - 2, query_heads / heads);
  std::vector<int64_t> merged(*shape);
  merged[rank - 3] = query_heads;
  const Value with_group_axis = b.op("Unsqueeze", {kv, b.ints(std::vector<int64_t>{rank - 2})});
  return b.op("Reshape", {b.op("Expand", {with_group_axis, b.ints(expanded)}), b.ints(merged)});
}

// `key_rank` is given: `key` may be computed (enable_gqa), and then its shape is not tracked.
Value attention_composite(Builder& b, Value query, Value key, int64_t key_rank, Value value,
                          const std::optional<Value>& attn_mask, bool is_causal, double scale) {
  std::vector<int64_t> swap_last(static_cast<size_t>(key_rank));
  for (int64_t d = 0; d < key_rank; ++d) swap_last[d] = d;
  std::swap(swap_last[key_rank - 1], swap_last[key_rank - 2]);
  const Value key_t = b.op("Transpose", {key}, {Attr::ints("perm", swap_last)});
  Value scores = b.op("Mul", {b.op("MatMul", {query, key_t}), b.scalar_like(scale, query)});
  const Value minus_inf = b.scalar_like(kMinusInf, query);
  if (is_causal) scores = b.op("Where", {causal_mask(b, query, key), scores, minus_inf});
  if (attn_mask) {
    scores = b.dtype(*attn_mask) == ScalarType::Bool ? b.op("Where", {*attn_mask, scores, minus_inf})
                                                      : b.op("Add", {scores, b.cast(*attn_mask, b.dtype(query))});
  }
  Value weights = b.op("Softmax", {scores}, {Attr::i("axis", -1)});
  if (attn_mask) {
    // A row with every key masked out gives zeros in torch (its "safe softmax"), not NaN.
    const Value row_max = reduce(b, "ReduceMax", scores, std::vector<int64_t>{-1}, true);
    weights = b.op("Where", {b.op("Equal", {row_max, minus_inf}), b.scalar_like(0.0, weights), weights});
  }
  return b.op("MatMul", {weights, value});
}

// ONNX's Attention (opset 23) on (B, H, L, E) inputs; 3-D inputs are one head. Its grouped-query
// attention repeats key heads as torch's enable_gqa does.
Value attention_op(Builder& b, Value query, Value key, Value value, const std::optional<Value>& attn_mask,
                   bool is_causal, double scale) {
  const bool one_head = b.rank(query) == 3;
  const Value head_axis = b.ints(std::vector<int64_t>{1});
  const auto four_d = [&](Value x) { return one_head ? b.op("Unsqueeze", {x, head_axis}) : x; };
  Inputs inputs = {four_d(query), four_d(key), four_d(value)};
  if (attn_mask) inputs.push_back(b.rank(*attn_mask) == 3 ? b.op("Unsqueeze", {*attn_mask, head_axis}) : *attn_mask);
  const Value out = b.op("Attention", inputs, {Attr::i("is_causal", is_causal), Attr::f("scale", scale)});
  return one_head ? b.op("Squeeze", {out, head_axis}) : out;
}

}  // namespace

namespace manual {

Value scaled_dot_product_attention(Builder& b, Value query, Value key, Value value, std::optional<Value> attn_mask,
                                   double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (dropout_p != 0.0) {
    b.fail("scaled_dot_product_attention with dropout_p > 0 drops attention weights at random, even in eval mode; "
           "export the model with dropout_p=0");
  }
  if (is_causal && attn_mask) b.fail("scaled_dot_product_attention takes is_causal or attn_mask, not both");
  const double factor = scale.value_or(1.0 / std::sqrt(static_cast<double>(static_dim(b, query, -1, "head size"))));
  const int64_t rank = b.rank(query);
  const bool same_rank = b.rank(key) == rank && b.rank(value) == rank;
  // onnxruntime's float16 Attention strays up to 5% from torch (which accumulates in float32)
  // where the composite stays within an ulp or two, so float16 keeps the composite.
  const bool fits_attention_op = same_rank && (rank == 4 || (rank == 3 && !enable_gqa));
  if (b.opset() >= 23 && fits_attention_op && b.dtype(query) != ScalarType::Half) {
    return attention_op(b, query, key, value, attn_mask, is_causal, factor);
  }
  const int64_t key_rank = b.rank(key);
  if (enable_gqa) {
    const int64_t query_heads = static_dim(b, query, -3, "query head count");
    key = repeat_heads(b, key, query_heads);
    value = repeat_heads(b, value, query_heads);
  }
  return attention_composite(b, query, key, key_rank, value, attn_mask, is_causal, factor);
}

}  // namespace manual
}  // namespace fastonnx
