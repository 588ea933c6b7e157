// Histograms: histc (equal-width bins between two bounds) and bincount (one bin per integer).
// Mixture-of-experts routers count the tokens sent to each expert with them. Each value is
// compared with every bin index (an [N, bins] mask) and the mask summed over N, which holds
// bins x N booleans: bins is the number of experts there, small.
#include "common.h"
#include "converters_reduction.h"

namespace fastonnx {
namespace {

// [N, 1] == [1, bins]: row i marks the bin of value i.
Value bin_mask(Builder& b, Value bin_of_each, Value bins) {
  const Value column = b.op<"Unsqueeze">({bin_of_each, b.ints({1})});
  return b.op<"Equal">({column, b.op<"Unsqueeze">({iota(b, bins), b.ints({0})})});
}

// The bounds histc bins between: min and max, or the data's when they are equal, widened by 1
// each way when those are equal too (torch's rule). Bounds the graph computes are compared when
// it runs.
std::pair<Value, Value> histc_bounds(Builder& b, Value x, const Scalar& min, const Scalar& max) {
  const Value given_lo = b.scalar_like(min, x), given_hi = b.scalar_like(max, x);
  const bool known = min.is_static() && max.is_static();
  if (known && min.to_double() != max.to_double()) return {given_lo, given_hi};
  const Value lo = reduce(b, "ReduceMin", x, std::nullopt, false);
  const Value hi = reduce(b, "ReduceMax", x, std::nullopt, false);
  const Value same = b.op<"Equal">({lo, hi});
  const Value one = b.scalar_like(int64_t{1}, x);
  const Value data_lo = b.op<"Where">({same, b.op<"Sub">({lo, one}), lo});
  const Value data_hi = b.op<"Where">({same, b.op<"Add">({hi, one}), hi});
  if (known) return {data_lo, data_hi};
  const Value equal = b.op<"Equal">({given_lo, given_hi});
  return {b.op<"Where">({equal, data_lo, given_lo}), b.op<"Where">({equal, data_hi, given_hi})};
}

}  // namespace

namespace manual {

Value histc(Builder& b, Value self, int64_t bins, Scalar min, Scalar max) {
  if (bins <= 0) b.fail("bins must be > 0, got " + std::to_string(bins));
  if (min.is_static() && max.is_static() && min.to_double() > max.to_double()) b.fail("max must be larger than min");
  const ScalarType out = b.dtype(self);
  // float16 sums of counts lose exactness past 2048; bin in float32, cast back at the end.
  const Value x = b.cast(b.op<"Reshape">({self, b.ints({-1})}), out == ScalarType::Double ? out : ScalarType::Float);
  const auto [lo, hi] = histc_bounds(b, x, min, max);
  // torch's bin of a value: (x - lo) * bins / (hi - lo), truncated; the value hi goes in the last bin.
  const Value scaled =
      b.op<"Div">({b.op<"Mul">({b.op<"Sub">({x, lo}), b.scalar_like(bins, x)}), b.op<"Sub">({hi, lo})});
  const Value last = b.scalar(bins - 1, ScalarType::Long);
  const Value bin = b.op<"Min">({b.cast(b.op<"Floor">({scaled}), ScalarType::Long), last});
  const Value inside = b.op<"And">({b.op<"GreaterOrEqual">({x, lo}), b.op<"LessOrEqual">({x, hi})});
  const Value mask =
      b.op<"And">({bin_mask(b, bin, b.scalar(bins, ScalarType::Long)), b.op<"Unsqueeze">({inside, b.ints({1})})});
  const Value counts = reduce(b, "ReduceSum", b.cast(mask, b.dtype(x)), std::vector<int64_t>{0}, false);
  return b.cast(counts, out);
}

Value bincount(Builder& b, Value self, std::optional<Value> weights, SymInt minlength) {
  if (b.rank(self) != 1) b.fail("bincount takes a 1-d tensor");
  const ScalarType out = b.out_meta(0).dtype;
  const Value x = b.cast(self, ScalarType::Long);
  // max(x) + 1 bins, at least minlength: the max over x and minlength - 1 (also for an empty x).
  const Value floor = b.op<"Sub">({b.long_scalar(minlength), b.scalar(int64_t{1}, ScalarType::Long)});
  const Value candidates = b.op<"Concat">({x, b.op<"Unsqueeze">({floor, b.ints({0})})}, {Attr::i("axis", 0)});
  const Value bins =
      b.op<"Add">({reduce(b, "ReduceMax", candidates, std::nullopt, false), b.scalar(int64_t{1}, ScalarType::Long)});
  const Value mask = bin_mask(b, x, bins);
  const Value counted =
      weights
          ? b.op<"Where">({mask, b.op<"Unsqueeze">({b.cast(*weights, out), b.ints({1})}), b.scalar(int64_t{0}, out)})
          : b.cast(mask, out);
  return reduce(b, "ReduceSum", counted, std::vector<int64_t>{0}, false);
}

}  // namespace manual
}  // namespace fastonnx
