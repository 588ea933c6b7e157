// Reshapes and permutations.
#include <algorithm>
#include <numeric>

#include "common.h"

namespace fastonnx::manual {

Value view(Builder& b, Value self, SymIntList size) { return reshape_to_output(b, self, size); }
Value reshape(Builder& b, Value self, SymIntList shape) { return reshape_to_output(b, self, shape); }
Value _unsafe_view(Builder& b, Value self, SymIntList size) { return reshape_to_output(b, self, size); }

Value flatten_using_ints(Builder& b, Value self, int64_t start_dim, int64_t end_dim) {
  const int64_t rank = b.rank(self);
  start_dim = wrap_dim(b, start_dim, rank);
  end_dim = wrap_dim(b, end_dim, rank);
  SymIntList size;
  for (int64_t d = 0; d < start_dim; ++d) size.push_back(SymInt(int64_t{0}));
  size.push_back(SymInt(int64_t{-1}));
  for (int64_t d = end_dim + 1; d < rank; ++d) size.push_back(SymInt(int64_t{0}));
  if (b.out_static_shape()) return reshape_to_output(b, self, size);
  // Dynamic: ONNX's 0 copies the input's size, which is what the kept dims need.
  return b.op("Reshape", {self, b.ints(size)});
}

Value permute(Builder& b, Value self, std::vector<int64_t> dims) {
  const int64_t rank = b.rank(self);
  bool identity = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    dims[i] = wrap_dim(b, dims[i], rank);
    identity = identity && dims[i] == static_cast<int64_t>(i);
  }
  if (identity) return self;
  return b.op("Transpose", {self}, {Attr::ints("perm", dims)});
}

Value transpose_int(Builder& b, Value self, int64_t dim0, int64_t dim1) {
  const int64_t rank = b.rank(self);
  dim0 = wrap_dim(b, dim0, rank);
  dim1 = wrap_dim(b, dim1, rank);
  if (dim0 == dim1 || rank < 2) return self;
  std::vector<int64_t> perm(static_cast<size_t>(rank));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[dim0], perm[dim1]);
  return b.op("Transpose", {self}, {Attr::ints("perm", perm)});
}

Value pixel_shuffle(Builder& b, Value self, int64_t upscale_factor) {
  const int64_t r = upscale_factor;
  // onnxruntime implements DepthToSpace for floating types only (no int64 or bool kernels).
  if (b.rank(self) == 4 && is_floating(b.dtype(self))) {
    return b.op("DepthToSpace", {self}, {Attr::i("blocksize", r), Attr::s("mode", "CRD")});
  }
  // Otherwise: (*, C*r*r, H, W) -> (*, C, r, r, H, W) -> (*, C, H, r, W, r) -> (*, C, H*r, W*r).
  const auto in = b.static_shape(self);
  if (!in || in->size() < 3) b.fail("pixel_shuffle needs a static input shape of rank 3 or more");
  // An empty input shuffles to an empty output; Reshape cannot make zero-size dims before opset 14.
  if (std::find(in->begin(), in->end(), 0) != in->end()) {
    const std::vector<int64_t> out = *b.out_static_shape();
    return b.constant(b.dtype(self), out, {});
  }
  const size_t lead = in->size() - 3;
  std::vector<int64_t> split(in->begin(), in->begin() + static_cast<std::ptrdiff_t>(lead));
  const int64_t c = (*in)[lead] / (r * r), h = (*in)[lead + 1], w = (*in)[lead + 2];
  for (int64_t d : {c, r, r, h, w}) split.push_back(d);
  std::vector<int64_t> perm(lead);
  std::iota(perm.begin(), perm.end(), 0);
  const auto at = static_cast<int64_t>(lead);
  for (int64_t d : {0, 3, 1, 4, 2}) perm.push_back(at + d);
  const Value moved = b.op("Transpose", {b.op("Reshape", {self, b.ints(split)})}, {Attr::ints("perm", perm)});
  return reshape_to_output(b, moved, {});
}

}  // namespace fastonnx::manual

namespace fastonnx::manual {

Value cat(Builder& b, std::vector<Value> tensors, int64_t dim) {
  // torch skips 1-D empty tensors whatever the rank of the others (a legacy rule).
  std::vector<Value> kept;
  for (Value t : tensors) {
    const auto shape = b.static_shape(t);
    if (!(shape && shape->size() == 1 && (*shape)[0] == 0)) kept.push_back(t);
  }
  if (kept.empty()) kept.push_back(tensors.front());
  b.cast_all(kept, b.compute_dtype(kept));
  if (kept.size() == 1) return kept.front();
  return b.op("Concat", spread(kept), {Attr::i("axis", dim)});
}

}  // namespace fastonnx::manual
