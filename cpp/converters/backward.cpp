// Backward ops that autograd records (exported training steps, torch.func graphs): the gradients
// of convolution, layer and group normalization, embedding lookups and softmax.
#include <limits>
#include <string>

#include "common.h"
#include "converters_backward.h"
#include "fastonnx/helpers.h"

namespace fastonnx {
namespace {

constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();

std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

// Whether output `i` of a backward op is wanted: torch returns None for the ones output_mask
// leaves out.
bool wanted(Builder& b, const std::vector<bool>& output_mask, size_t i) {
  return output_mask[i] && b.out_meta(i).dtype != ScalarType::Undefined;
}

// Stands in for an output torch leaves out (None): nothing reads it.
Value left_out(Builder& b, Value like) {
  const int64_t empty[] = {0};
  return b.constant(b.dtype(like), empty, {});
}

std::vector<int64_t> static_shape_of(Builder& b, Value v, const char* what) {
  const auto shape = b.static_shape(v);
  if (!shape) b.fail(std::string("convolution_backward needs a static shape for ") + what);
  return *shape;
}

// The weight gradient of a convolution of `x` (N, G*Cg, *S) whose output gradient is `dy`
// (N, G*Og, *Out): dw[o, c, k] = sum over n, p of dy[n, o, p] * x_padded[n, c, p*stride +
// k*dilation]. That is itself a convolution, of x with its batch and channel dims swapped by dy
// used as the kernel, stride and dilation exchanged; the result (Cg, G*Og, *K') covers at least
// the kernel extent K and is cropped to it. Gives (G*Og, Cg, *K).
Value conv_weight_grad(Builder& b, Value dy, Value x, const std::vector<int64_t>& x_shape,
                       const std::vector<int64_t>& dy_shape, const std::vector<int64_t>& kernel,
                       const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                       const std::vector<int64_t>& dilation, int64_t groups) {
  const size_t n = kernel.size();
  const int64_t batch = x_shape[0], cg = x_shape[1] / groups, og = dy_shape[1] / groups;
  const auto grouped = [&](Value v, const std::vector<int64_t>& shape, int64_t per_group,
                           const std::vector<int64_t>& perm, const std::vector<int64_t>& lead) {
    std::vector<int64_t> split = {shape[0], groups, per_group}, merged(lead);
    std::vector<int64_t> full_perm(perm);
    for (size_t i = 0; i < n; ++i) {
      split.push_back(shape[i + 2]);
      merged.push_back(shape[i + 2]);
      full_perm.push_back(static_cast<int64_t>(i) + 3);
    }
    const Value moved = b.op<"Transpose">({b.op<"Reshape">({v, b.ints(split)})}, {Attr::ints("perm", full_perm)});
    return b.op<"Reshape">({moved, b.ints(merged)});
  };
  // x: (N, G, Cg, *S) -> (Cg, G, N, *S) -> (Cg, G*N, *S); dy: (N, G, Og, *Out) -> (G, Og, N, *Out)
  // -> (G*Og, N, *Out).
  const Value inputs = grouped(x, x_shape, cg, {2, 1, 0}, {cg, groups * batch});
  const Value kernels = grouped(dy, dy_shape, og, {1, 2, 0}, {groups * og, batch});
  const Value full =
      b.op<"Conv">({inputs, kernels}, {Attr::ints("strides", dilation), Attr::ints("dilations", stride),
                                       Attr::ints("pads", helper_twice(b, padding)), Attr::i("group", groups)});
  const Value cropped =
      b.op<"Slice">({full, b.ints(std::vector<int64_t>(n, 0)), b.ints(kernel), b.ints(range(2, n + 2))});
  std::vector<int64_t> perm = {1, 0};
  for (size_t i = 0; i < n; ++i) perm.push_back(static_cast<int64_t>(i) + 2);
  return b.op<"Transpose">({cropped}, {Attr::ints("perm", perm)});
}

}  // namespace

namespace manual {

std::array<Value, 3> convolution_backward(Builder& b, Value grad_output, Value input, Value weight,
                                          std::optional<SymIntList>, SymIntList stride, SymIntList padding,
                                          SymIntList dilation, bool transposed,
                                          SymIntList /*output_padding: in dy's shape*/, SymInt groups,
                                          std::vector<bool> output_mask) {
  const std::vector<int64_t> x_shape = static_shape_of(b, input, "the input");
  const std::vector<int64_t> dy_shape = static_shape_of(b, grad_output, "the output gradient");
  const std::vector<int64_t> w_shape = static_shape_of(b, weight, "the weight");
  if (x_shape.size() != w_shape.size()) b.fail("convolution_backward needs a batched input");
  const size_t n = w_shape.size() - 2;
  const std::vector<int64_t> strides = b.static_ints(stride), pads = b.static_ints(padding),
                             dilations = b.static_ints(dilation);
  const std::vector<int64_t> kernel(w_shape.begin() + 2, w_shape.end());
  const int64_t group = b.static_int(groups);
  std::array<Value, 3> out = {left_out(b, grad_output), left_out(b, grad_output), left_out(b, grad_output)};
  if (wanted(b, output_mask, 0)) {
    if (transposed) {
      // The input gradient of a transposed convolution is the plain convolution of dy.
      out[0] = conv_nd(b, grad_output, weight, std::nullopt, stride, helper_twice(b, pads), dilation, groups);
    } else {
      // And the other way round; output_padding restores the input positions past the last
      // window (the stride's remainder).
      SymIntList extra;
      for (size_t i = 0; i < n; ++i) {
        const int64_t reached = (dy_shape[i + 2] - 1) * strides[i] - 2 * pads[i] + dilations[i] * (kernel[i] - 1) + 1;
        extra.emplace_back(x_shape[i + 2] - reached);
      }
      out[0] = conv_transpose_nd(b, grad_output, weight, std::nullopt, stride, padding, extra, dilation, groups);
    }
  }
  if (wanted(b, output_mask, 1)) {
    // For a transposed convolution the roles of input and output gradient swap.
    out[1] = transposed
                 ? conv_weight_grad(b, input, grad_output, dy_shape, x_shape, kernel, strides, pads, dilations, group)
                 : conv_weight_grad(b, grad_output, input, x_shape, dy_shape, kernel, strides, pads, dilations, group);
  }
  if (wanted(b, output_mask, 2)) {
    std::vector<int64_t> axes = {0};
    for (size_t i = 0; i < n; ++i) axes.push_back(static_cast<int64_t>(i) + 2);
    out[2] = reduce(b, "ReduceSum", grad_output, axes, false);
  }
  return out;
}

std::array<Value, 3> native_layer_norm_backward(Builder& b, Value grad_out, Value input, SymIntList normalized_shape,
                                                Value mean, Value rstd, std::optional<Value> weight,
                                                std::optional<Value>, std::vector<bool> output_mask) {
  // With x_hat = (x - mean) * rstd and g = dy * weight, the input gradient is
  // rstd * (g - mean(g) - x_hat * mean(g * x_hat)) over the normalized dims.
  const int64_t rank = b.rank(input), axis = rank - static_cast<int64_t>(normalized_shape.size());
  const std::vector<int64_t> normalized = range(axis, rank), leading = range(0, axis);
  const ScalarType dtype = b.dtype(input);
  const Value x_hat = b.op<"Mul">({b.op<"Sub">({input, b.cast(mean, dtype)}), b.cast(rstd, dtype)});
  const auto sum_leading = [&](Value v) { return leading.empty() ? v : reduce(b, "ReduceSum", v, leading, false); };
  std::array<Value, 3> out = {left_out(b, input), left_out(b, input), left_out(b, input)};
  if (wanted(b, output_mask, 0)) {
    const Value g = weight ? b.op<"Mul">({grad_out, *weight}) : grad_out;
    const Value mean_g = reduce_mean_keepdims(b, g, normalized);
    const Value mean_g_x = reduce_mean_keepdims(b, b.op<"Mul">({g, x_hat}), normalized);
    const Value centered = b.op<"Sub">({b.op<"Sub">({g, mean_g}), b.op<"Mul">({x_hat, mean_g_x})});
    out[0] = b.op<"Mul">({b.cast(rstd, dtype), centered});
  }
  if (wanted(b, output_mask, 1)) out[1] = sum_leading(b.op<"Mul">({grad_out, x_hat}));
  if (wanted(b, output_mask, 2)) out[2] = sum_leading(grad_out);
  return out;
}

std::array<Value, 3> native_group_norm_backward(Builder& b, Value grad_out, Value input, Value mean, Value rstd,
                                                std::optional<Value> weight, SymInt N, SymInt C, SymInt, int64_t group,
                                                std::vector<bool> output_mask) {
  // As for layer norm, per (sample, group) of C/group channels; mean and rstd are (N, group).
  const ScalarType dtype = b.dtype(input);
  const Value input_shape = b.op<"Shape">({input});
  const Value by_group = b.ints(SymIntList{N, SymInt(group), SymInt(-1)});
  const Value by_channel = b.ints(SymIntList{N, C, SymInt(-1)});
  const Value last = b.ints(std::vector<int64_t>{2});
  const Value group_mean = b.cast(b.op<"Unsqueeze">({mean, last}), dtype);
  const Value group_rstd = b.cast(b.op<"Unsqueeze">({rstd, last}), dtype);
  const Value x_hat = b.op<"Mul">({b.op<"Sub">({b.op<"Reshape">({input, by_group}), group_mean}), group_rstd});
  std::array<Value, 3> out = {left_out(b, input), left_out(b, input), left_out(b, input)};
  if (wanted(b, output_mask, 0)) {
    Value g = grad_out;
    if (weight) {
      std::vector<int64_t> per_channel(static_cast<size_t>(b.rank(input) - 1), 1);
      per_channel[0] = -1;
      g = b.op<"Mul">({g, b.op<"Reshape">({*weight, b.ints(per_channel)})});
    }
    g = b.op<"Reshape">({g, by_group});
    const std::vector<int64_t> within = {2};
    const Value mean_g = reduce_mean_keepdims(b, g, within);
    const Value mean_g_x = reduce_mean_keepdims(b, b.op<"Mul">({g, x_hat}), within);
    const Value centered = b.op<"Sub">({b.op<"Sub">({g, mean_g}), b.op<"Mul">({x_hat, mean_g_x})});
    out[0] = b.op<"Reshape">({b.op<"Mul">({group_rstd, centered}), input_shape});
  }
  const std::vector<int64_t> batch_and_positions = {0, 2};
  if (wanted(b, output_mask, 1)) {
    const Value x_hat_channels = b.op<"Reshape">({x_hat, by_channel});
    const Value product = b.op<"Mul">({b.op<"Reshape">({grad_out, by_channel}), x_hat_channels});
    out[1] = reduce(b, "ReduceSum", product, batch_and_positions, false);
  }
  if (wanted(b, output_mask, 2)) {
    out[2] = reduce(b, "ReduceSum", b.op<"Reshape">({grad_out, by_channel}), batch_and_positions, false);
  }
  return out;
}

Value embedding_dense_backward(Builder& b, Value grad_output, Value indices, SymInt num_weights, SymInt padding_idx,
                               bool scale_grad_by_freq) {
  // Each row of dy is added to the weight row its index selects.
  const ScalarType dtype = b.dtype(grad_output);
  const Value flat = b.ints(std::vector<int64_t>{-1}), one = b.ints(std::vector<int64_t>{1});
  const Value idx = b.op<"Reshape">({b.cast(indices, ScalarType::Long), flat});
  const Value width = b.op<"Slice">(
      {b.op<"Shape">({grad_output}), b.ints(std::vector<int64_t>{-1}), b.ints(std::vector<int64_t>{kEnd})});
  Value rows = b.op<"Reshape">({grad_output, b.op<"Concat">({flat, width}, {Attr::i("axis", 0)})});
  const int64_t padding = b.static_int(padding_idx);
  if (padding >= 0) {  // the padding row gets no gradient
    const Value is_padding = b.op<"Equal">({idx, b.scalar(padding, ScalarType::Long)});
    rows = b.op<"Where">({b.op<"Unsqueeze">({is_padding, one}), b.scalar(0, dtype), rows});
  }
  const Value weights = b.ints(SymIntList{num_weights});
  const Value out_shape = b.op<"Concat">({weights, width}, {Attr::i("axis", 0)});
  if (b.opset() < 16) {
    // No ScatterND reduction yet: a one-hot (index, weight row) matrix, transposed, times the rows.
    const Value row_ids = iota(b, b.op<"Squeeze">({weights}));
    const Value one_hot = b.cast(b.op<"Equal">({b.op<"Unsqueeze">({idx, one}), row_ids}), dtype);
    if (scale_grad_by_freq) {
      const Value counts = reduce(b, "ReduceSum", one_hot, std::vector<int64_t>{0}, false);
      rows = b.op<"Div">({rows, b.op<"Unsqueeze">({b.op<"Gather">({counts, idx}), one})});
    }
    return b.op<"MatMul">({b.op<"Transpose">({one_hot}, {Attr::ints("perm", {1, 0})}), rows});
  }
  if (scale_grad_by_freq) {  // each row divided by how often its index occurs
    const Value zeros = b.op<"Expand">({b.scalar(0, ScalarType::Long), weights});
    const Value ones = b.op<"Expand">({b.scalar(1, ScalarType::Long), b.op<"Shape">({idx})});
    const Value counts = b.op<"ScatterElements">({zeros, idx, ones}, {Attr::s("reduction", "add")});
    rows = b.op<"Div">({rows, b.cast(b.op<"Unsqueeze">({b.op<"Gather">({counts, idx}), one}), dtype)});
  }
  // onnxruntime's ScatterND adds no float16; float32 holds its values exactly.
  const ScalarType sum_dtype = dtype == ScalarType::Half || dtype == ScalarType::BFloat16 ? ScalarType::Float : dtype;
  const Value zeros = b.op<"Expand">({b.scalar(0, sum_dtype), out_shape});
  const Value sums =
      b.op<"ScatterND">({zeros, b.op<"Unsqueeze">({idx, one}), b.cast(rows, sum_dtype)}, {Attr::s("reduction", "add")});
  return b.cast(sums, dtype);
}

Value _softmax_backward_data(Builder& b, Value grad_output, Value output, int64_t dim, ScalarType) {
  // dx = y * (dy - sum(dy * y)) along dim, in the dtype of the softmax's input.
  const int64_t rank = b.rank(output);
  const std::optional<std::vector<int64_t>> axes =
      rank == 0 ? std::nullopt : std::optional(std::vector<int64_t>{wrap_dim(b, dim, rank)});
  const Value dot = reduce(b, "ReduceSum", b.op<"Mul">({grad_output, output}), axes, true);
  return b.cast(b.op<"Mul">({output, b.op<"Sub">({grad_output, dot})}), b.out_meta().dtype);
}

}  // namespace manual
}  // namespace fastonnx
