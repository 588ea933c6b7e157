// Sorting, top-k and unique: ONNX TopK and Unique. Among equal elements TopK puts the lower index first in either
// direction, which is the order of torch's stable sort (and a valid one for the unstable sort).
#include <array>
#include <optional>

#include "converters_sorting.h"
#include "indexing.h"

namespace fastonnx {

// The `k` (all when absent) largest or smallest elements of `self` along `dim`, sorted, and their
// indices.
std::array<Value, 2> top_k(Builder& b, Value self, int64_t dim, bool largest, const std::optional<SymInt>& k) {
  const int64_t rank = b.rank(self);
  const int64_t axis = wrap_dim(b, dim, rank);
  // torch sorts a 0-d tensor (whatever k) as itself, at index 0.
  if (rank == 0) return {self, b.scalar(0, ScalarType::Long)};
  const ScalarType dtype = b.dtype(self);
  // ONNX TopK has no bool version; uint8 holds it exactly.
  const Value x = dtype == ScalarType::Bool ? b.cast(self, ScalarType::Byte) : self;
  const Value count = k ? b.ints(SymIntList{*k}) : sizes_of(b, self, {axis});
  // torch's sorted=False leaves the order unspecified; sorted is one such order.
  auto outs = b.op_n<"TopK">({x, count}, {Attr::i("axis", axis), Attr::i("largest", largest), Attr::i("sorted", 1)}, 2);
  if (dtype == ScalarType::Bool) outs[0] = b.cast(outs[0], ScalarType::Bool);
  return {outs[0], outs[1]};
}

namespace {

// ONNX Unique over `x` (along `axis`, else flattened), sorted ascending: values, first indices,
// inverse indices (of the flattened tensor), counts. onnxruntime's Unique takes float, double,
// float16, int8 and int64: other integers and bool are exact in int64.
std::vector<Value> onnx_unique(Builder& b, Value x, std::optional<int64_t> axis) {
  const ScalarType dtype = b.dtype(x);
  const bool taken = is_floating(dtype) || dtype == ScalarType::Char || dtype == ScalarType::Long;
  Attrs attrs = {Attr::i("sorted", 1)};
  if (axis) attrs.push_back(Attr::i("axis", *axis));
  std::vector<Value> outs = b.op_n<"Unique">({taken ? x : b.cast(x, ScalarType::Long)}, attrs, 4);
  outs[0] = b.cast(outs[0], dtype);
  return outs;
}

// The unique values of a flattened floating tensor, where torch counts each NaN as a value of its
// own, after the numbers (onnxruntime's Unique does not keep them): the numbers' Unique, then the
// NaNs in their order. Inverse indices of the flattened tensor.
std::vector<Value> unique_with_nans(Builder& b, Value flat) {
  const Value zero = b.scalar(int64_t{0}, ScalarType::Long), one = b.scalar(int64_t{1}, ScalarType::Long);
  const Value nan = b.op<"IsNaN">({flat});
  const Value number = b.op<"Not">({nan});
  const Attrs first_axis = {Attr::i("axis", 0)};
  const std::vector<Value> numbers = onnx_unique(b, b.op<"Compress">({flat, number}, first_axis), std::nullopt);
  const Value nans = b.op<"Compress">({flat, nan}, first_axis);
  const Value values = b.op<"Concat">({numbers[0], nans}, first_axis);
  const Value counts = b.op<"Concat">({numbers[3], b.op<"Expand">({one, b.op<"Shape">({nans})})}, first_axis);
  // An element's place among the numbers (or the NaNs): the count of them up to it, minus one.
  const auto place = [&](Value among) {
    return b.op<"Sub">({b.op<"CumSum">({b.cast(among, ScalarType::Long), zero}), one});
  };
  // (a 0 appended, so that the Gather has an item when there is no number; a NaN takes the other side)
  const Value number_inverse = b.op<"Concat">({numbers[2], b.ints(std::vector<int64_t>{0})}, first_axis);
  const Value of_number = b.op<"Gather">({number_inverse, b.op<"Max">({place(number), zero})});
  const Value of_nan = b.op<"Add">({place(nan), b.op<"Shape">({numbers[0]})});
  return {values, Value{}, b.op<"Where">({nan, of_nan, of_number}), counts};
}

// torch.unique's values (along `axis`, else of the flattened tensor), with the index of each
// element's (slice's) value and each value's count. An output torch was not asked for is empty,
// as torch returns it.
std::array<Value, 3> unique_values(Builder& b, Value self, std::optional<int64_t> axis, bool return_inverse,
                                   bool return_counts) {
  const bool floating = is_floating(b.dtype(self));
  if (axis && floating) {
    b.fail(
        "unique along a dim of floating values is not supported: torch takes slices holding NaN as distinct, "
        "which ONNX's Unique does not say");
  }
  const std::vector<Value> outs =
      floating ? unique_with_nans(b, b.op<"Reshape">({self, b.ints({-1})})) : onnx_unique(b, self, axis);
  const Value none = b.tensor({}, {0}, ScalarType::Long);
  Value inverse = none;
  if (return_inverse) inverse = axis ? outs[2] : b.op<"Reshape">({outs[2], b.op<"Shape">({self})});
  return {outs[0], inverse, return_counts ? outs[3] : none};
}

}  // namespace

namespace manual {

std::array<Value, 3> _unique2(Builder& b, Value self, bool, bool return_inverse, bool return_counts) {
  return unique_values(b, self, std::nullopt, return_inverse, return_counts);
}

std::array<Value, 3> unique_dim(Builder& b, Value self, int64_t dim, bool, bool return_inverse, bool return_counts) {
  return unique_values(b, self, wrap_dim(b, dim, b.rank(self)), return_inverse, return_counts);
}

}  // namespace manual
}  // namespace fastonnx
