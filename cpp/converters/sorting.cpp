// Sorting and top-k: ONNX TopK. Among equal elements TopK puts the lower index first in either
// direction, which is the order of torch's stable sort (and a valid one for the unstable sort).
#include <array>
#include <optional>

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

}  // namespace fastonnx
