// Size and layout queries on tensors, as 0-d tensors.
#include "common.h"
#include "converters_symbolic.h"

namespace fastonnx::manual {

// A complex tensor's (real, imaginary) pairs have its sizes first: its Shape reads them.
Value sym_size_int(Builder& b, Value self, int64_t dim) {
  b.accept_complex_pairs();
  return scalar_size_along(b, self, wrap_dim(b, dim, b.rank(self)));
}

// The stride of a contiguous tensor: the product of the sizes after `dim`.
Value sym_stride_int(Builder& b, Value self, int64_t dim) {
  b.accept_complex_pairs();
  const int64_t rank = b.rank(self);
  dim = wrap_dim(b, dim, rank);
  if (dim == rank - 1 || rank == 0) return b.scalar(Scalar(int64_t{1}), ScalarType::Long);
  const Value tail =
      b.op<"Slice">({b.op<"Shape">({self}), b.ints(std::vector<int64_t>{dim + 1}), b.ints(std::vector<int64_t>{rank})});
  return reduce(b, "ReduceProd", tail, std::nullopt, false);
}

Value sym_storage_offset(Builder& b, Value) { return b.scalar(Scalar(int64_t{0}), ScalarType::Long); }

Value sym_is_contiguous(Builder& b, Value) { return b.scalar(Scalar(true), ScalarType::Bool); }

}  // namespace fastonnx::manual
