// Scaled dot-product attention: softmax(q @ k^T * scale + mask) @ v over the last two dims, with
// torch's conventions: a bool mask keeps where true, a float mask is added, is_causal keeps the
// lower triangle aligned at the top left, and a row that masks every key gives zeros.
#include <cmath>
#include <limits>
#include <string>

#include "common.h"
#include "converters_attention.h"

namespace fastonnx {
namespace {

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

// True where query i may attend to key j: j <= i (torch's tril over (L, S)).
Value causal_mask(Builder& b, Value query, Value key, int64_t key_rank) {
  const Value rows = iota(b, scalar_size_along(b, query, b.rank(query) - 2));
  const Value cols = iota(b, scalar_size_along(b, key, key_rank - 2));
  return b.op<"GreaterOrEqual">({b.op<"Unsqueeze">({rows, b.ints(std::vector<int64_t>{1})}), cols});
}

// torch's default scale 1/sqrt(E), E the query's last size; computed in double as torch does,
// in the graph when E is dynamic.
Value default_scale(Builder& b, Value query) {
  const int64_t last = b.rank(query) - 1;
  const Dim head_size = b.shape(query)[static_cast<size_t>(last)];
  if (head_size.is_static()) return b.scalar_like(1.0 / std::sqrt(static_cast<double>(head_size.value)), query);
  const Value e = b.cast(scalar_size_along(b, query, last), ScalarType::Double);
  return b.cast(b.op<"Div">({b.scalar(1.0, ScalarType::Double), b.op<"Sqrt">({e})}), b.dtype(query));
}

// enable_gqa: each of the key's heads (dim -3) serves query_heads / key_heads query heads in a
// row (torch's repeat_interleave). Counts that are dynamic are read from the shapes at run time.
Value repeat_heads(Builder& b, Value kv, Value query) {
  const int64_t rank = b.rank(kv), query_rank = b.rank(query);
  if (rank < 3 || query_rank < 3) b.fail("scaled_dot_product_attention with enable_gqa needs inputs of rank 3 or more");
  const int64_t head_axis = rank - 3, query_head_axis = query_rank - 3;
  const Dim heads = b.shape(kv)[static_cast<size_t>(head_axis)];
  const Dim query_heads = b.shape(query)[static_cast<size_t>(query_head_axis)];
  if (heads.is_static() && query_heads.is_static()) {
    if (heads.value == query_heads.value) return kv;
    if (heads.value == 0 || query_heads.value % heads.value != 0) {
      b.fail("enable_gqa needs the query's head count to be a multiple of the key's (" +
             std::to_string(query_heads.value) + " vs " + std::to_string(heads.value) + ")");
    }
  }
  const Value lead = sizes_between(b, kv, 0, head_axis), kv_heads = size_along(b, kv, head_axis);
  const Value tail = sizes_between(b, kv, rank - 2, rank), merged_heads = size_along(b, query, query_head_axis);
  const Value groups = b.op<"Div">({merged_heads, kv_heads});
  const Value with_group_axis = b.op<"Unsqueeze">({kv, b.ints(std::vector<int64_t>{rank - 2})});
  const Value expanded = b.op<"Expand">({with_group_axis, join_sizes(b, {lead, kv_heads, groups, tail})});
  return reshape_to(b, expanded, join_sizes(b, {lead, merged_heads, tail}));
}

// `key_rank` is given: `key` may be computed (enable_gqa), and then its shape is not tracked.
Value attention_composite(Builder& b, Value query, Value key, int64_t key_rank, Value value,
                          const std::optional<Value>& attn_mask, bool is_causal, Value scale) {
  std::vector<int64_t> swap_last(static_cast<size_t>(key_rank));
  for (int64_t d = 0; d < key_rank; ++d) swap_last[d] = d;
  std::swap(swap_last[key_rank - 1], swap_last[key_rank - 2]);
  const Value key_t = b.op<"Transpose">({key}, {Attr::ints("perm", swap_last)});
  Value scores = b.op<"Mul">({b.op<"MatMul">({query, key_t}), scale});
  const Value minus_inf = b.scalar_like(kMinusInf, query);
  if (is_causal) scores = b.op<"Where">({causal_mask(b, query, key, key_rank), scores, minus_inf});
  if (attn_mask) {
    scores = b.dtype(*attn_mask) == ScalarType::Bool ? b.op<"Where">({*attn_mask, scores, minus_inf})
                                                     : b.op<"Add">({scores, b.cast(*attn_mask, b.dtype(query))});
  }
  Value weights = b.op<"Softmax">({scores}, {Attr::i("axis", -1)});
  if (attn_mask) {
    // A row with every key masked out gives zeros in torch (its "safe softmax"), not NaN.
    const Value row_max = reduce(b, "ReduceMax", scores, std::vector<int64_t>{-1}, true);
    weights = b.op<"Where">({b.op<"Equal">({row_max, minus_inf}), b.scalar_like(0.0, weights), weights});
  }
  return b.op<"MatMul">({weights, value});
}

// ONNX's Attention (opset 23) on (B, H, L, E) inputs; 3-D inputs are one head. Its grouped-query
// attention repeats key heads as torch's enable_gqa does; its default scale is torch's.
Value attention_op(Builder& b, Value query, Value key, Value value, const std::optional<Value>& attn_mask,
                   bool is_causal, std::optional<double> scale) {
  const bool one_head = b.rank(query) == 3;
  const Value head_axis = b.ints(std::vector<int64_t>{1});
  const auto four_d = [&](Value x) { return one_head ? b.op<"Unsqueeze">({x, head_axis}) : x; };
  Inputs inputs = {four_d(query), four_d(key), four_d(value)};
  if (attn_mask) inputs.push_back(b.rank(*attn_mask) == 3 ? b.op<"Unsqueeze">({*attn_mask, head_axis}) : *attn_mask);
  Attrs attrs = {Attr::i("is_causal", is_causal)};
  if (scale) attrs.push_back(Attr::f("scale", *scale));
  const Value out = b.op<"Attention">(inputs, attrs);
  return one_head ? b.op<"Squeeze">({out, head_axis}) : out;
}

}  // namespace

namespace manual {

Value scaled_dot_product_attention(Builder& b, Value query, Value key, Value value, std::optional<Value> attn_mask,
                                   double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
  if (dropout_p != 0.0) {
    b.fail(
        "scaled_dot_product_attention with dropout_p > 0 drops attention weights at random, even in eval mode; "
        "export the model with dropout_p=0");
  }
  if (is_causal && attn_mask) b.fail("scaled_dot_product_attention takes is_causal or attn_mask, not both");
  const int64_t rank = b.rank(query);
  const bool same_rank = b.rank(key) == rank && b.rank(value) == rank;
  // onnxruntime's float16 Attention strays up to 5% from torch (which accumulates in float32)
  // where the composite stays within an ulp or two, so float16 keeps the composite.
  const bool fits_attention_op = same_rank && (rank == 4 || (rank == 3 && !enable_gqa));
  if (b.opset() >= 23 && fits_attention_op && b.dtype(query) != ScalarType::Half) {
    return attention_op(b, query, key, value, attn_mask, is_causal, scale);
  }
  const Value factor = scale ? b.scalar_like(*scale, query) : default_scale(b, query);
  const int64_t key_rank = b.rank(key);
  if (enable_gqa) {
    key = repeat_heads(b, key, query);
    value = repeat_heads(b, value, query);
  }
  return attention_composite(b, query, key, key_rank, value, attn_mask, is_causal, factor);
}

}  // namespace manual
}  // namespace fastonnx
