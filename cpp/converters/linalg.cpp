// Matrix products that depend on the element type, einsum and pairwise distances.
#include <algorithm>
#include <numeric>
#include <string>

#include "common.h"
#include "converters_linalg.h"
#include "reduction.h"

namespace fastonnx {

namespace {

// onnxruntime's Gemm has kernels for floating types only; integers go through MatMul, which
// has int32/int64 kernels and is exact.
bool gemm_fits(Builder& b, Value x) { return is_floating(b.dtype(x)); }

}  // namespace

// The p-norm over the last axis of the differences of every row of `x1` (..., P, M) with every
// row of `x2` (..., R, M): (..., P, R), computed exactly from the differences.
Value distances(Builder& b, Value x1, Value x2, double p) {
  const Value rows = b.op<"Unsqueeze">({x1, b.ints(std::vector<int64_t>{-2})});
  const Value cols = b.op<"Unsqueeze">({x2, b.ints(std::vector<int64_t>{-3})});
  return vector_norm(b, b.op<"Sub">({rows, cols}), p, std::vector<int64_t>{-1}, false);
}

namespace {

// The rows i < j of an (N, M) tensor, in row-major order of (i, j): constant index lists when N
// is static, else the positions (NonZero, row-major) of the strict upper triangle of an N x N
// mask.
std::pair<Value, Value> row_pairs(Builder& b, Value self) {
  const Dim rows = b.shape(self)[0];
  if (rows.is_static()) {
    std::vector<int64_t> first, second;
    for (int64_t i = 0; i < rows.value; ++i) {
      for (int64_t j = i + 1; j < rows.value; ++j) {
        first.push_back(i);
        second.push_back(j);
      }
    }
    return {b.ints(first), b.ints(second)};
  }
  const Value zero = b.scalar(int64_t{0}, ScalarType::Long), one = b.scalar(int64_t{1}, ScalarType::Long);
  const Value positions = iota(b, scalar_size_along(b, self, 0));
  const Value upper = b.op<"Less">({b.op<"Unsqueeze">({positions, b.ints(std::vector<int64_t>{1})}),
                                    b.op<"Unsqueeze">({positions, b.ints(std::vector<int64_t>{0})})});
  const Value pairs = b.op<"NonZero">({upper});
  return {b.op<"Gather">({pairs, zero}), b.op<"Gather">({pairs, one})};
}

}  // namespace

// The distances between rows i < j of `self` (N, M), in row-major order of (i, j).
Value pairwise_distances(Builder& b, Value self, double p) {
  if (b.rank(self) != 2) b.fail("pdist needs a 2-D input");
  const auto [first, second] = row_pairs(b, self);
  const Value diff = b.op<"Sub">({b.op<"Gather">({self, first}), b.op<"Gather">({self, second})});
  return vector_norm(b, diff, p, std::vector<int64_t>{-1}, false);
}

namespace manual {

Value addmm(Builder& b, Value self, Value mat1, Value mat2, Scalar beta, Scalar alpha) {
  // Gemm takes alpha and beta as attributes: numbers the graph computes take the MatMul path.
  if (gemm_fits(b, mat1) && alpha.is_static() && beta.is_static()) {
    if (beta == 0.0) return b.op<"Gemm">({mat1, mat2}, {Attr::f("alpha", alpha), Attr::f("beta", 0.0)});
    return b.op<"Gemm">({mat1, mat2, self}, {Attr::f("alpha", alpha), Attr::f("beta", beta)});
  }
  Value product = b.op<"MatMul">({mat1, mat2});
  if (alpha != int64_t{1}) product = b.op<"Mul">({product, b.scalar_like(alpha, product)});
  if (beta == 0.0) return product;  // torch ignores `self` then
  const Value scaled_self = beta == int64_t{1} ? self : b.op<"Mul">({self, b.scalar_like(beta, self)});
  return b.op<"Add">({scaled_self, product});
}

Value einsum(Builder& b, std::string equation, std::vector<Value> tensors, std::optional<std::vector<int64_t>>) {
  // `path` only orders torch's contractions; ONNX's Einsum chooses its own.
  std::string compact;
  for (char c : equation) {
    if (c != ' ') compact.push_back(c);
  }
  // torch lets the `...` of operands stand for different numbers of dims (broadcast from the
  // right); ONNX wants the same number in every operand, so pad the shorter ones with 1s.
  const std::string inputs = compact.substr(0, compact.find("->"));
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    const size_t comma = inputs.find(',', start);
    terms.push_back(inputs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != tensors.size()) b.fail("einsum equation '" + equation + "' does not match its operand count");
  std::vector<int64_t> ellipsis_dims(terms.size(), -1);
  int64_t widest = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t dots = terms[i].find("...");
    if (dots == std::string::npos) continue;
    ellipsis_dims[i] = b.rank(tensors[i]) - static_cast<int64_t>(terms[i].size() - 3);
    widest = std::max(widest, ellipsis_dims[i]);
  }
  for (size_t i = 0; i < terms.size(); ++i) {
    if (ellipsis_dims[i] < 0 || ellipsis_dims[i] == widest) continue;
    const auto at = static_cast<int64_t>(terms[i].find("..."));
    std::vector<int64_t> axes;
    for (int64_t k = 0; k < widest - ellipsis_dims[i]; ++k) axes.push_back(at + k);
    tensors[i] = b.op<"Unsqueeze">({tensors[i], b.ints(axes)});
  }
  // ONNX's Einsum has no bool version: the products of bools are counted in int64, then given
  // torch's result type (bool, a count above zero being true; int64 where torch sums them).
  const bool logical = b.dtype(tensors.front()) == ScalarType::Bool;
  if (logical) b.cast_all(tensors, ScalarType::Long);
  // An explicit output without `...` sums over the ellipsis dims in torch; onnxruntime rejects
  // it, so keep them in front and sum them after.
  const size_t arrow = compact.find("->");
  const bool has_ellipsis = *std::max_element(ellipsis_dims.begin(), ellipsis_dims.end()) >= 0;
  Value out;
  if (arrow == std::string::npos || !has_ellipsis || compact.find("...", arrow) != std::string::npos) {
    out = b.op<"Einsum">(spread(tensors), {Attr::s("equation", compact)});
  } else {
    compact.insert(arrow + 2, "...");
    out = b.op<"Einsum">(spread(tensors), {Attr::s("equation", compact)});
    if (widest > 0) {
      std::vector<int64_t> ellipsis_axes(static_cast<size_t>(widest));
      std::iota(ellipsis_axes.begin(), ellipsis_axes.end(), 0);
      out = reduce(b, "ReduceSum", out, ellipsis_axes, false);
    }
  }
  return logical ? b.cast(out, b.out_meta().dtype) : out;
}

}  // namespace manual
}  // namespace fastonnx
