// Batch normalization in inference mode.
#include "common.h"

namespace fastonnx {
namespace {

// Per-channel scale or shift: the given tensor, or `fill` for every channel when absent.
Value per_channel(Builder& b, const std::optional<Value>& given, Value input, double fill) {
  if (given) return *given;
  const auto shape = b.shape(input);
  if (shape.size() < 2) b.fail("batch_norm needs an input of rank 2 or more (N, C, ...)");
  if (!shape[1].is_static()) b.fail("batch_norm without weight needs a static channel count");
  return b.list(std::vector<Scalar>(static_cast<size_t>(shape[1].value), Scalar(fill)), b.dtype(input));
}

// Normalizes with the batch's own statistics: torch does this in eval mode when the module
// keeps no running statistics (track_running_stats=False).
Value batch_stats_norm(Builder& b, Value x, Value scale, Value shift, double eps) {
  std::vector<int64_t> axes = {0};
  for (int64_t d = 2; d < b.rank(x); ++d) axes.push_back(d);
  const auto reduce_mean = [&](Value v) { return reduce_mean_keepdims(b, v, axes); };
  std::vector<int64_t> channel_shape(static_cast<size_t>(b.rank(x)), 1);
  channel_shape[1] = -1;
  const Value as_channel = b.ints(channel_shape);
  const Value centered = b.op("Sub", {x, reduce_mean(x)});
  const Value var = reduce_mean(b.op("Mul", {centered, centered}));
  const Value normed = b.op("Div", {centered, b.op("Sqrt", {b.op("Add", {var, b.scalar_like(eps, var)})})});
  return b.op("Add", {b.op("Mul", {normed, b.op("Reshape", {scale, as_channel})}), b.op("Reshape", {shift, as_channel})});
}

Value batch_norm_eval(Builder& b, Value input, const std::optional<Value>& weight, const std::optional<Value>& bias,
                      const std::optional<Value>& mean, const std::optional<Value>& var, double eps) {
  const Value scale = per_channel(b, weight, input, 1.0);
  const Value shift = per_channel(b, bias, input, 0.0);
  if (!mean || !var) return batch_stats_norm(b, input, scale, shift, eps);
  return b.op("BatchNormalization", {input, scale, shift, *mean, *var}, {Attr::f("epsilon", eps)});
}

}  // namespace

namespace manual {

Value batch_norm(Builder& b, Value input, std::optional<Value> weight, std::optional<Value> bias,
                 std::optional<Value> running_mean, std::optional<Value> running_var, bool training, double,
                 double eps, bool) {
  if (training && running_mean) {
    b.fail("batch_norm in training mode updates running statistics, which ONNX cannot express; "
           "export the model in eval mode (model.eval())");
  }
  return batch_norm_eval(b, input, weight, bias, running_mean, running_var, eps);
}

std::array<Value, 3> _native_batch_norm_legit_no_training(Builder& b, Value input, std::optional<Value> weight,
                                                          std::optional<Value> bias, Value running_mean,
                                                          Value running_var, double, double eps) {
  // The saved mean and inverse std are empty in inference; they exist only for autograd.
  const int64_t empty[] = {0};
  const Value out = batch_norm_eval(b, input, weight, bias, running_mean, running_var, eps);
  return {out, b.constant(b.out_meta(1).dtype, empty, {}), b.constant(b.out_meta(2).dtype, empty, {})};
}

}  // namespace manual
}  // namespace fastonnx
