// Random tensors: uniform and normal draws, permutations and Bernoulli trials.
#include <cmath>
#include <string>

#include "common.h"
#include "converters_random.h"

namespace fastonnx {
namespace {

enum class Distribution { Uniform, Normal };

// The type onnxruntime draws in for an output of `dtype` (it has float32 and float64
// generators only).
ScalarType draw_dtype(Builder& b, ScalarType dtype) {
  if (!is_floating(dtype)) {
    b.fail(std::string("random values of dtype ") + dtype_name(dtype) + " have no ONNX form (ONNX draws floats)");
  }
  return dtype == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
}

Attrs distribution_attrs(Distribution d, ScalarType dtype, ScalarType drawn) {
  Attrs attrs = {Attr::i("dtype", onnx_dtype(drawn))};
  // torch's uniform values lie in [0, 1); a float32 draw just below 1 would round up to 1 in a
  // narrower type, so the draw stops at that type's largest value below 1.
  if (d == Distribution::Uniform && drawn != dtype) {
    const int mantissa_bits = dtype == ScalarType::Half ? 11 : dtype == ScalarType::BFloat16 ? 8 : 24;
    attrs.push_back(Attr::f("high", 1.0 - std::ldexp(1.0, -mantissa_bits)));
  }
  return attrs;
}

}  // namespace

// Draws of `dtype` shaped like `like` (whatever its element type), by `op`: RandomUniformLike or
// RandomNormalLike.
Value random_like(Builder& b, OpType op, Value like, ScalarType dtype) {
  const Distribution d = op == "RandomUniformLike" ? Distribution::Uniform : Distribution::Normal;
  const ScalarType drawn = draw_dtype(b, dtype);
  return b.cast(b.op(op, {like}, distribution_attrs(d, dtype, drawn)), dtype);
}

// Draws of `dtype` of shape `size` by `op` (RandomUniform or RandomNormal): a static shape is an
// attribute, a dynamic one is the shape of a tensor the draws are made like.
Value random_of_size(Builder& b, OpType op, const SymIntList& size, ScalarType dtype) {
  bool dynamic = false;
  for (const SymInt& s : size) dynamic = dynamic || !s.is_static();
  if (dynamic)
    return random_like(b, op == "RandomUniform" ? OpType("RandomUniformLike") : OpType("RandomNormalLike"),
                       b.op<"ConstantOfShape">({b.ints(size)}), dtype);
  const Distribution d = op == "RandomUniform" ? Distribution::Uniform : Distribution::Normal;
  const ScalarType drawn = draw_dtype(b, dtype);
  Attrs attrs = distribution_attrs(d, dtype, drawn);
  attrs.push_back(Attr::ints("shape", b.static_ints(size)));
  return b.cast(b.op(op, {}, attrs), dtype);
}

// 1 where a uniform draw shaped like `self` falls below the probability `p`, in the dtype of the
// node's output.
Value bernoulli_trials(Builder& b, Value self, Value p) {
  const ScalarType drawn = b.dtype(p) == ScalarType::Double ? ScalarType::Double : ScalarType::Float;
  const Value draws = b.op<"RandomUniformLike">({self}, {Attr::i("dtype", onnx_dtype(drawn))});
  return b.cast(b.op<"Less">({draws, b.cast(p, drawn)}), b.out_meta().dtype);
}

// Integers uniform in [low, high): floor(u * (high - low)) + low for u uniform in [0, 1), drawn
// in float64 so that every integer of a span below 2^53 can come out.
Value random_integers(Builder& b, Value like, SymInt low, SymInt high, ScalarType dtype) {
  const Value draws = b.op<"RandomUniformLike">({like}, {Attr::i("dtype", onnx_dtype(ScalarType::Double))});
  const Value lo = b.cast(b.long_scalar(low), ScalarType::Double);
  const Value span = b.op<"Sub">({b.cast(b.long_scalar(high), ScalarType::Double), lo});
  return b.cast(b.op<"Add">({b.op<"Floor">({b.op<"Mul">({draws, span})}), lo}), dtype);
}

Value random_integers_of_size(Builder& b, const SymIntList& size, SymInt low, SymInt high, ScalarType dtype) {
  return random_integers(b, b.op<"ConstantOfShape">({b.ints(size)}), low, high, dtype);
}

namespace manual {

Value randperm(Builder& b, SymInt n, std::optional<ScalarType>, std::optional<bool>) {
  // Ranking n independent uniform keys gives every permutation the same probability.
  const Value keys = random_of_size(b, "RandomUniform", {n}, ScalarType::Float);
  const Value k = b.ints(SymIntList{n});
  const Value order = b.op_n<"TopK">({keys, k}, {Attr::i("axis", 0)}, 2)[1];
  return b.cast(order, b.out_meta().dtype);
}

Value bernoulli_p(Builder& b, Value self, double p) {
  return bernoulli_trials(b, self, b.scalar(p, ScalarType::Double));
}

Value multinomial(Builder& b, Value self, SymInt num_samples, bool replacement) {
  const int64_t samples = b.static_int(num_samples);
  if (!replacement && samples > 1) b.fail("draws without replacement have no ONNX form (ONNX's Multinomial replaces)");
  const int64_t rank = b.rank(self);
  if (rank != 1 && rank != 2) b.fail("multinomial takes a 1-d or 2-d tensor of probabilities");
  // ONNX takes the rows' unnormalized log-probabilities, in a batch (onnxruntime: of float32).
  Value logits = b.op<"Log">({b.cast(self, ScalarType::Float)});
  if (rank == 1) logits = b.op<"Unsqueeze">({logits, b.ints({0})});
  const Value draws =
      b.op<"Multinomial">({logits}, {Attr::i("sample_size", samples), Attr::i("dtype", onnx_dtype(ScalarType::Long))});
  return rank == 1 ? b.op<"Squeeze">({draws, b.ints({0})}) : draws;
}

}  // namespace manual
}  // namespace fastonnx
