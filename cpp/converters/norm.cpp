// Normalization: batch (inference and batch statistics), layer, group, instance and RMS norm,
// and dropout's two modes.
#include <algorithm>
#include <limits>

#include "common.h"
#include "converters_norm.h"

namespace fastonnx {

namespace {

std::vector<int64_t> axes_from(int64_t first, int64_t rank) {
  std::vector<int64_t> axes;
  for (int64_t d = first; d < rank; ++d) axes.push_back(d);
  return axes;
}

// The number of channels (dim 1) of `input`: a 1-D int64 value of one element.
Value channel_count(Builder& b, Value input) {
  const auto shape = b.shape(input);
  if (shape.size() < 2) b.fail("normalization needs an input of rank 2 or more (N, C, ...)");
  if (shape[1].is_static()) return b.ints(std::vector<int64_t>{shape[1].value});
  return b.op<"Gather">({b.op<"Shape">({input}), b.ints(std::vector<int64_t>{1})});
}

// Per-channel scale or shift: the given tensor, or `fill` for every channel when absent.
Value per_channel(Builder& b, const std::optional<Value>& given, Value input, double fill) {
  if (given) return *given;
  return b.op<"Expand">({b.scalar_like(fill, input), channel_count(b, input)});
}

// A scale or shift over the trailing `normalized_shape`: the given tensor, or `fill` throughout.
Value over_shape(Builder& b, const std::optional<Value>& given, Value input, const SymIntList& normalized_shape,
                 double fill) {
  if (given) return *given;
  return b.op<"Expand">({b.scalar_like(fill, input), b.ints(normalized_shape)});
}

// A per-channel vector shaped to broadcast against an (N, C, ...) tensor of rank `rank`.
Value as_channel(Builder& b, Value per_channel_values, int64_t rank) {
  std::vector<int64_t> shape(static_cast<size_t>(std::max<int64_t>(rank - 1, 1)), 1);
  shape[0] = -1;
  return b.op<"Reshape">({per_channel_values, b.ints(shape)});
}

struct Standardized {
  Value out, mean, rstd;  // mean and rstd keep the reduced axes (size 1)
};

// (x - mean) / sqrt(var + eps) over `axes`, with the biased variance, as torch's norms compute.
Standardized standardize(Builder& b, Value x, const std::vector<int64_t>& axes, double eps) {
  const Value mean = reduce_mean_keepdims(b, x, axes);
  const Value centered = b.op<"Sub">({x, mean});
  const Value var = reduce_mean_keepdims(b, b.op<"Mul">({centered, centered}), axes);
  const Value rstd = b.op<"Reciprocal">({b.op<"Sqrt">({b.op<"Add">({var, b.scalar_like(eps, var)})})});
  return {b.op<"Mul">({centered, rstd}), mean, rstd};
}

Value affine(Builder& b, Value normed, const std::optional<Value>& weight, const std::optional<Value>& bias) {
  const Value scaled = weight ? b.op<"Mul">({normed, *weight}) : normed;
  return bias ? b.op<"Add">({scaled, *bias}) : scaled;
}

// Batch normalization with the batch's own statistics over (N, spatial...), per channel,
// computed in `compute` (the input's dtype, or float32 for a narrower float). The mean and
// inverse std come back as (C,).
Standardized batch_stats_norm(Builder& b, Value input, const std::optional<Value>& weight,
                              const std::optional<Value>& bias, double eps, ScalarType compute) {
  const int64_t rank = b.rank(input);
  if (rank < 2) b.fail("batch_norm needs an input of rank 2 or more (N, C, ...)");
  std::vector<int64_t> axes = {0};
  for (int64_t d = 2; d < rank; ++d) axes.push_back(d);
  const Standardized s = standardize(b, b.cast(input, compute), axes, eps);
  const auto channel = [&](const std::optional<Value>& v) -> std::optional<Value> {
    if (!v) return std::nullopt;
    return as_channel(b, b.cast(*v, compute), rank);
  };
  const Value flat = b.ints(std::vector<int64_t>{-1});
  return {affine(b, s.out, channel(weight), channel(bias)), b.op<"Reshape">({s.mean, flat}),
          b.op<"Reshape">({s.rstd, flat})};
}

}  // namespace

Value batch_norm_eval(Builder& b, Value input, const std::optional<Value>& weight, const std::optional<Value>& bias,
                      const std::optional<Value>& mean, const std::optional<Value>& var, double eps) {
  // Without running statistics torch normalizes with the batch's own, in eval mode too
  // (track_running_stats=False).
  if (!mean || !var) return batch_stats_norm(b, input, weight, bias, eps, b.dtype(input)).out;
  if (b.rank(input) < 2) b.fail("batch_norm needs an input of rank 2 or more (N, C, ...)");
  const Value scale = per_channel(b, weight, input, 1.0);
  const Value shift = per_channel(b, bias, input, 0.0);
  return b.op<"BatchNormalization">({input, scale, shift, *mean, *var}, {Attr::f("epsilon", eps)});
}

// What the saved-statistics outputs hold when torch normalizes with running statistics: empty
// tensors (they exist only for autograd).
std::array<Value, 3> with_empty_stats(Builder& b, Value out) {
  const int64_t empty[] = {0};
  return {out, b.constant(b.out_meta(1).dtype, empty, {}), b.constant(b.out_meta(2).dtype, empty, {})};
}

// Layer norm over the trailing `normalized_shape`, with the mean and inverse std (reduced dims
// kept) in `stats_dtype`, or as ONNX computes them when the caller does not use them.
std::array<Value, 3> layer_norm_with_stats(Builder& b, Value input, const SymIntList& normalized_shape,
                                           const std::optional<Value>& weight, const std::optional<Value>& bias,
                                           double eps, std::optional<ScalarType> stats_dtype) {
  const int64_t rank = b.rank(input);
  const int64_t axis = rank - static_cast<int64_t>(normalized_shape.size());
  if (axis < 0) b.fail("layer_norm's normalized_shape has more dims than its input");
  if (b.opset() >= 17) {
    // Computes in float32 (stash_type=1) like torch does for float16; Mean and InvStdDev come
    // out in float32 and are cast to torch's dtype.
    const Value scale = over_shape(b, weight, input, normalized_shape, 1.0);
    Inputs inputs = {input, scale};
    if (bias) inputs.push_back(*bias);
    const std::vector<Value> outs =
        b.op_n<"LayerNormalization">(inputs, {Attr::i("axis", axis), Attr::f("epsilon", eps)}, 3);
    if (!stats_dtype) return {outs[0], outs[1], outs[2]};
    return {outs[0], b.cast(outs[1], *stats_dtype), b.cast(outs[2], *stats_dtype)};
  }
  const Standardized s = standardize(b, input, axes_from(axis, rank), eps);
  return {affine(b, s.out, weight, bias), s.mean, s.rstd};
}

// Group norm: the channels split into `groups` groups, each normalized over its channels and
// spatial positions; scale and shift per channel. Mean and inverse std come back as (N, groups).
std::array<Value, 3> group_norm_with_stats(Builder& b, Value input, const std::optional<Value>& weight,
                                           const std::optional<Value>& bias, int64_t groups, double eps) {
  const int64_t rank = b.rank(input);
  if (rank < 2) b.fail("group_norm needs an input of rank 2 or more (N, C, ...)");
  // (N, groups, C / groups * spatial); spelled out when static, since -1 cannot be inferred for N = 0.
  std::vector<int64_t> grouped_shape = {0, groups, -1};
  if (auto shape = b.static_shape(input)) {
    int64_t per_group = 1;
    for (size_t d = 1; d < shape->size(); ++d) per_group *= (*shape)[d];
    grouped_shape = {(*shape)[0], groups, groups == 0 ? 0 : per_group / groups};
  }
  const Value grouped = b.op<"Reshape">({input, b.ints(grouped_shape)});
  const Standardized s = standardize(b, grouped, {2}, eps);
  const Value normed = b.op<"Reshape">({s.out, b.op<"Shape">({input})});
  const auto channel = [&](const std::optional<Value>& v) -> std::optional<Value> {
    if (!v) return std::nullopt;
    return as_channel(b, *v, rank);
  };
  const Value stats_shape = b.ints(std::vector<int64_t>{grouped_shape[0], groups});
  return {affine(b, normed, channel(weight), channel(bias)), b.op<"Reshape">({s.mean, stats_shape}),
          b.op<"Reshape">({s.rstd, stats_shape})};
}

// The output and mask of dropout: ONNX Dropout when training, else the input and an all-true mask.
std::array<Value, 2> dropout_with_mask(Builder& b, Value input, double p, std::optional<bool> train) {
  // torch drops nothing when not training, and with p = 0 its mask keeps everything.
  if ((train.has_value() && !*train) || p == 0.0) {
    return {input, b.op<"Expand">({b.scalar(true, ScalarType::Bool), b.op<"Shape">({input})})};
  }
  const std::vector<Value> outs =
      b.op_n<"Dropout">({input, b.scalar(p, ScalarType::Float), b.scalar(true, ScalarType::Bool)}, {}, 2);
  return {outs[0], outs[1]};
}

namespace manual {

Value batch_norm(Builder& b, Value input, std::optional<Value> weight, std::optional<Value> bias,
                 std::optional<Value> running_mean, std::optional<Value> running_var, bool training, double, double eps,
                 bool) {
  // Training mode normalizes with the batch's statistics; the update of the running statistics
  // is dropped, as every buffer mutation is (ONNX has no buffers to write), and as torch.onnx
  // drops BatchNormalization's running-statistics outputs.
  if (training) {
    // torch computes a float16 or bfloat16 batch in float32, rounding only the result.
    const ScalarType dtype = b.dtype(input);
    const bool narrow = dtype == ScalarType::Half || dtype == ScalarType::BFloat16;
    const Value out = batch_stats_norm(b, input, weight, bias, eps, narrow ? ScalarType::Float : dtype).out;
    return b.cast(out, dtype);
  }
  return batch_norm_eval(b, input, weight, bias, running_mean, running_var, eps);
}

std::array<Value, 3> _native_batch_norm_legit(Builder& b, Value input, std::optional<Value> weight,
                                              std::optional<Value> bias, Value running_mean, Value running_var,
                                              bool training, double, double eps) {
  if (!training) return with_empty_stats(b, batch_norm_eval(b, input, weight, bias, running_mean, running_var, eps));
  // The update of running_mean/running_var is dropped: ONNX has no buffers to write.
  const Standardized s = batch_stats_norm(b, input, weight, bias, eps, b.dtype(input));
  return {s.out, s.mean, s.rstd};
}

std::array<Value, 3> _native_batch_norm_legit_no_stats(Builder& b, Value input, std::optional<Value> weight,
                                                       std::optional<Value> bias, bool, double, double eps) {
  // Without running statistics only the batch's own exist, whatever `training` says.
  const Standardized s = batch_stats_norm(b, input, weight, bias, eps, b.dtype(input));
  return {s.out, s.mean, s.rstd};
}

Value group_norm(Builder& b, Value input, int64_t num_groups, std::optional<Value> weight, std::optional<Value> bias,
                 double eps, bool) {
  // Opset 21 fixed GroupNormalization's scale and bias to be per channel, as in torch.
  if (b.opset() >= 21 && b.rank(input) >= 3) {
    const Value scale = per_channel(b, weight, input, 1.0);
    const Value shift = per_channel(b, bias, input, 0.0);
    return b.op<"GroupNormalization">({input, scale, shift},
                                      {Attr::i("num_groups", num_groups), Attr::f("epsilon", eps)});
  }
  return group_norm_with_stats(b, input, weight, bias, num_groups, eps)[0];
}

Value instance_norm(Builder& b, Value input, std::optional<Value> weight, std::optional<Value> bias,
                    std::optional<Value> running_mean, std::optional<Value> running_var, bool use_input_stats, double,
                    double eps, bool) {
  if (!use_input_stats) {
    if (!running_mean || !running_var) b.fail("instance_norm without input statistics needs running statistics");
    return batch_norm_eval(b, input, weight, bias, running_mean, running_var, eps);
  }
  if (b.rank(input) < 3) b.fail("instance_norm needs an input of rank 3 or more (N, C, spatial...)");
  const Value scale = per_channel(b, weight, input, 1.0);
  const Value shift = per_channel(b, bias, input, 0.0);
  return b.op<"InstanceNormalization">({input, scale, shift}, {Attr::f("epsilon", eps)});
}

Value rms_norm(Builder& b, Value input, SymIntList normalized_shape, std::optional<Value> weight,
               std::optional<double> eps) {
  const int64_t rank = b.rank(input);
  const int64_t axis = rank - static_cast<int64_t>(normalized_shape.size());
  if (axis < 0) b.fail("rms_norm's normalized_shape has more dims than its input");
  // torch's default epsilon is that of the type it computes in: float32 for float16 too.
  const double epsilon = eps.value_or(b.dtype(input) == ScalarType::Double ? std::numeric_limits<double>::epsilon()
                                                                           : std::numeric_limits<float>::epsilon());
  if (b.opset() >= 23) {
    const Value scale = over_shape(b, weight, input, normalized_shape, 1.0);
    return b.op<"RMSNormalization">({input, scale}, {Attr::i("axis", axis), Attr::f("epsilon", epsilon)});
  }
  const Value mean_square = reduce_mean_keepdims(b, b.op<"Mul">({input, input}), axes_from(axis, rank));
  const Value rms = b.op<"Sqrt">({b.op<"Add">({mean_square, b.scalar_like(epsilon, mean_square)})});
  const Value normed = b.op<"Div">({input, rms});
  return weight ? b.op<"Mul">({normed, *weight}) : normed;
}

}  // namespace manual
}  // namespace fastonnx
