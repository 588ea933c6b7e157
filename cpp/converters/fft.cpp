// Fourier transforms and the complex views FFT users need. A complex tensor travels as a real
// tensor with a trailing (real, imaginary) dimension of 2 (see Builder::accept_complex_pairs),
// which is the layout ONNX's DFT reads and writes; a real DFT input has a trailing 1.
//
// torch's normalization: 0 none, 1 by 1/sqrt(n), 2 by 1/n, n the number of transformed points.
// ONNX's inverse DFT divides by n itself, so inverse transforms are rescaled by n.
#include <cmath>
#include <cstring>
#include <string>

#include "common.h"
#include "converters_fft.h"
#include "converters_unary.h"

namespace fastonnx {
namespace {

constexpr double kPi = 3.14159265358979323846;

double torch_scale(Builder& b, int64_t normalization, double n) {
  switch (normalization) {
    case 0:
      return 1.0;
    case 1:
      return 1.0 / std::sqrt(n);
    case 2:
      return 1.0 / n;
    default:
      b.fail("unknown FFT normalization " + std::to_string(normalization) + " (0, 1 or 2)");
  }
}

// The length of `x` along `axis`: static, or read at run time.
SymInt signal_size(Builder& b, Value x, int64_t axis) {
  const Dim d = b.shape(x)[static_cast<size_t>(axis)];
  if (d.is_static()) return SymInt(d.value);
  return SymInt(scalar_size_along(b, x, axis));
}

std::vector<int64_t> wrapped(Builder& b, const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(wrap_dim(b, d, rank));
  return out;
}

// The DFT along `axis` as a MatMul (ONNX has no DFT before opset 17): the axis moved next to the
// (real, imaginary) dimension, the two flattened, times the real matrix of the complex DFT.
Value dft_matmul(Builder& b, Value x, int64_t axis, int64_t rank, int64_t n, bool inverse, bool onesided,
                 bool real_input) {
  const ScalarType parts = real_part_type(b.dtype(x));
  if (parts != ScalarType::Float && parts != ScalarType::Double) {
    b.fail(std::string("a Fourier transform of ") + dtype_name(parts) + " values has no ONNX form before opset 17");
  }
  const int64_t m = onesided ? n / 2 + 1 : n, in_parts = real_input ? 1 : 2;
  // out[k] = sum_t in[t] * e^(-+2 pi i k t / n) (/ n when inverse, as ONNX's DFT does):
  // re += a cos - (+-) b sin ... written per (t, part) row and (k, part) column.
  std::vector<double> matrix(static_cast<size_t>(n * in_parts * m * 2));
  const double sign = inverse ? 1.0 : -1.0, scale = inverse ? 1.0 / static_cast<double>(n) : 1.0;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < m; ++k) {
      const double angle = 2 * kPi * static_cast<double>((k * t) % n) / static_cast<double>(n);
      const double c = std::cos(angle) * scale, s = sign * std::sin(angle) * scale;
      const auto at = [&](int64_t part_in, int64_t part_out) {
        return static_cast<size_t>(((t * in_parts + part_in) * m + k) * 2 + part_out);
      };
      matrix[at(0, 0)] = c;  // re * cos
      matrix[at(0, 1)] = s;  // re * (+-sin) -> im
      if (!real_input) {
        matrix[at(1, 0)] = -s;  // im * (-+sin) -> re
        matrix[at(1, 1)] = c;   // im * cos -> im
      }
    }
  }
  std::vector<uint8_t> bytes;
  for (double v : matrix) {
    const size_t at = bytes.size();
    if (parts == ScalarType::Float) {
      const float f = static_cast<float>(v);
      bytes.resize(at + sizeof f);
      std::memcpy(bytes.data() + at, &f, sizeof f);
    } else {
      bytes.resize(at + sizeof v);
      std::memcpy(bytes.data() + at, &v, sizeof v);
    }
  }
  const int64_t matrix_shape[] = {n * in_parts, m * 2};
  const Value dft = b.constant(parts, matrix_shape, std::move(bytes));
  // Physical rank rank + 1: the signal axis goes to rank - 1, next to the parts.
  std::vector<int64_t> perm;
  for (int64_t i = 0; i <= rank; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(axis)], perm[static_cast<size_t>(rank - 1)]);
  const bool move = axis != rank - 1;
  const Value moved = move ? b.op<"Transpose">({x}, {Attr::ints("perm", perm)}) : x;
  std::vector<int64_t> flat(static_cast<size_t>(rank - 1), 0), split(flat);
  flat.push_back(-1);
  split.insert(split.end(), {m, 2});
  const Value product = b.op<"MatMul">({b.op<"Reshape">({moved, b.ints(flat)}), dft});
  const Value out = b.op<"Reshape">({product, b.ints(split)});
  return move ? b.op<"Transpose">({out}, {Attr::ints("perm", perm)}) : out;
}

// ONNX DFT semantics along `axis` of `x` (torch rank `rank`, pair layout), of length `n`.
Value dft(Builder& b, Value x, int64_t axis, int64_t rank, const SymInt& n, bool inverse, bool onesided,
          bool real_input) {
  const Attr inverse_attr = Attr::i("inverse", inverse), onesided_attr = Attr::i("onesided", onesided);
  if (b.opset() >= 20) {
    return b.op<"DFT">({x, std::optional<Value>(), b.scalar(axis, ScalarType::Long)}, {inverse_attr, onesided_attr});
  }
  if (b.opset() >= 17) return b.op<"DFT">({x}, {Attr::i("axis", axis), inverse_attr, onesided_attr});
  if (!n.is_static()) {
    b.fail(
        "a Fourier transform below opset 17 needs the static length of every transformed dimension (its DFT "
        "matrix is a constant; ONNX DFT, from opset 17, takes any length)");
  }
  return dft_matmul(b, x, axis, rank, n.value, inverse, onesided, real_input);
}

// The DFT of a real signal of static length `n` along `axis` (`x`: its bins, pair layout) with the
// imaginary parts of bin 0 and, for even n, bin n / 2 set to exactly 0, as they are (and as
// torch's transform gives them): a float32 DFT leaves rounding noise there (2.6e-7 beside
// PyTorch's zeros in its own suite, test_stft_*). A dynamic length keeps the DFT's values.
Value exact_real_bins(Builder& b, Value x, int64_t axis, int64_t rank, const SymInt& n, bool onesided) {
  if (!n.is_static()) return x;
  const int64_t bins = onesided ? n.value / 2 + 1 : n.value;
  std::vector<Scalar> mask;
  for (int64_t k = 0; k < bins; ++k) {
    const bool zero_imaginary = k == 0 || (n.value % 2 == 0 && k == n.value / 2);
    mask.insert(mask.end(), {Scalar(1.0), Scalar(zero_imaginary ? 0.0 : 1.0)});
  }
  std::vector<int64_t> shape(static_cast<size_t>(rank + 1), 1);
  shape[static_cast<size_t>(axis)] = bins;
  shape.back() = 2;
  const Value broadcast = b.op<"Reshape">({b.list(mask, real_part_type(b.dtype(x))), b.ints(shape)});
  return b.op<"Mul">({x, broadcast});
}

// `x` times torch's normalization of a transform over dims of these lengths, and times their
// product when `inverse` (ONNX's inverse DFT divides by it, torch's only as the normalization
// says). Computed in the graph when a length is dynamic.
Value normalized(Builder& b, Value x, int64_t normalization, const SymIntList& lengths, bool inverse) {
  double points = 1;
  bool known = true;
  for (const SymInt& n : lengths) {
    known = known && n.is_static();
    points *= static_cast<double>(n.value);
  }
  const double scale = torch_scale(b, normalization, points);
  const ScalarType parts = real_part_type(b.dtype(x));
  if (known) {
    const double factor = scale * (inverse ? points : 1.0);
    if (factor == 1.0) return x;
    return b.op<"Mul">({x, b.scalar(factor, parts)});
  }
  // points ^ (normalization's exponent, plus 1 when inverse)
  const double exponent = (normalization == 0 ? 0.0 : normalization == 1 ? -0.5 : -1.0) + (inverse ? 1.0 : 0.0);
  if (exponent == 0.0) return x;
  const Value product = reduce(b, "ReduceProd", b.ints(lengths), std::vector<int64_t>{0}, false);
  const Value factor = b.op<"Pow">({b.cast(product, ScalarType::Double), b.scalar(exponent, ScalarType::Double)});
  return b.op<"Mul">({x, b.cast(factor, parts)});
}

// Part 0 (real) or 1 (imaginary) of a complex tensor of torch rank `rank`.
Value part(Builder& b, Value complex, int64_t rank, int64_t index) {
  const Value pairs = b.as_real(complex);
  return b.op<"Gather">({pairs, b.scalar(index, ScalarType::Long)}, {Attr::i("axis", rank)});
}

}  // namespace

namespace manual {

Value _fft_r2c(Builder& b, Value self, std::vector<int64_t> dim, int64_t normalization, bool onesided) {
  b.accept_complex_pairs();
  const int64_t rank = b.rank(self);
  const std::vector<int64_t> dims = wrapped(b, dim, rank);
  if (dims.empty()) b.fail("_fft_r2c needs at least one dimension");
  // The one-sided half is taken along the last of `dim`, on the real input; then full transforms.
  SymIntList lengths;
  Value x = b.op<"Unsqueeze">({self, b.ints(std::vector<int64_t>{rank})});
  for (size_t i = dims.size(); i-- > 0;) {
    lengths.push_back(signal_size(b, self, dims[i]));
    const bool last = i + 1 == dims.size();
    x = dft(b, x, dims[i], rank, lengths.back(), false, onesided && last, last);
    if (last) x = exact_real_bins(b, x, dims[i], rank, lengths.back(), onesided);
  }
  return b.as_complex(normalized(b, x, normalization, lengths, false));
}

Value _fft_c2c(Builder& b, Value self, SymIntList dim, int64_t normalization, bool forward) {
  b.accept_complex_pairs();
  const int64_t rank = b.rank(self);
  SymIntList lengths;
  Value x = self;
  for (int64_t d : wrapped(b, b.static_ints(dim), rank)) {
    lengths.push_back(signal_size(b, self, d));
    x = dft(b, x, d, rank, lengths.back(), !forward, false, false);
  }
  return normalized(b, x, normalization, lengths, !forward);
}

Value _fft_c2r(Builder& b, Value self, std::vector<int64_t> dim, int64_t normalization, SymInt last_dim_size) {
  b.accept_complex_pairs();
  const int64_t rank = b.rank(self);
  const std::vector<int64_t> dims = wrapped(b, dim, rank);
  if (dims.empty()) b.fail("_fft_c2r needs at least one dimension");
  SymIntList lengths;
  Value x = self;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    lengths.push_back(signal_size(b, self, dims[i]));
    x = dft(b, x, dims[i], rank, lengths.back(), true, false, false);
  }
  // The last dim holds the one-sided half of a Hermitian signal of length L: X[L-k] = conj(X[k])
  // restores the rest before the inverse transform (the imaginary parts of X[0] and, for even
  // L, X[L/2] drop out of its real part, as in torch). L and the given length are read at run
  // time when dynamic.
  const int64_t axis = dims.back();
  const SymInt& length = last_dim_size;
  const SymInt given = signal_size(b, self, axis);
  const Value axes = b.ints(std::vector<int64_t>{axis});
  const Value conjugate = b.list({Scalar(1.0), Scalar(-1.0)}, real_part_type(b.dtype(self)));
  if (length.is_static() && given.is_static()) {
    const int64_t half = length.value / 2 + 1;
    if (given.value < half) {
      b.fail("_fft_c2r of length " + std::to_string(length.value) + " needs " + std::to_string(half) +
             " input points, got " + std::to_string(given.value));
    }
    if (given.value > half)
      x = b.op<"Slice">({x, b.ints(std::vector<int64_t>{0}), b.ints(std::vector<int64_t>{half}), axes});
    if (length.value - half > 0) {
      // X[L-h], ..., X[1], conjugated.
      const Value mirrored = b.op<"Slice">({x, b.ints(std::vector<int64_t>{length.value - half}),
                                            b.ints(std::vector<int64_t>{0}), axes, b.ints(std::vector<int64_t>{-1})});
      x = b.op<"Concat">({x, b.op<"Mul">({mirrored, conjugate})}, {Attr::i("axis", axis)});
    }
  } else {
    const Value l = b.ints(SymIntList{length});
    const Value half =
        b.op<"Add">({b.op<"Div">({l, b.ints(std::vector<int64_t>{2})}), b.ints(std::vector<int64_t>{1})});
    x = b.op<"Slice">({x, b.ints(std::vector<int64_t>{0}), half, axes});
    // X[L-h], ..., X[1], conjugated: empty when L - h is 0.
    const Value mirrored = b.op<"Slice">(
        {x, b.op<"Sub">({l, half}), b.ints(std::vector<int64_t>{0}), axes, b.ints(std::vector<int64_t>{-1})});
    x = b.op<"Concat">({x, b.op<"Mul">({mirrored, conjugate})}, {Attr::i("axis", axis)});
  }
  lengths.push_back(length);
  const Value signal = part(b, dft(b, x, axis, rank, length, true, false, false), rank, 0);
  return normalized(b, signal, normalization, lengths, true);
}

Value real(Builder& b, Value self) {
  if (!is_complex(b.dtype(self))) return self;  // a real tensor is its own real part
  b.accept_complex_pairs();
  return part(b, self, b.rank(self), 0);
}

Value imag(Builder& b, Value self) {
  if (!is_complex(b.dtype(self))) b.fail("imag is defined for complex tensors only");
  b.accept_complex_pairs();
  return part(b, self, b.rank(self), 1);
}

Value _conj(Builder& b, Value self) {
  if (!is_complex(b.dtype(self))) return self;  // a real tensor is its own conjugate
  b.accept_complex_pairs();
  const Value signs = b.list({Scalar(1.0), Scalar(-1.0)}, real_part_type(b.dtype(self)));
  return b.as_complex(b.op<"Mul">({b.as_real(self), signs}));
}

// hypot(re, im) as torch computes it: scaled by the larger part, so squares do not overflow.
Value abs(Builder& b, Value self) {
  b.accept_complex_pairs();
  const Value parts = b.op<"Abs">({b.as_real(self)});
  const std::vector<int64_t> last{-1};
  const Value larger = reduce(b, "ReduceMax", parts, last, true);
  const Value zero = b.op<"Equal">({larger, b.scalar_like(int64_t{0}, larger)});
  const Value ratios = b.op<"Div">({parts, b.op<"Where">({zero, b.scalar_like(int64_t{1}, larger), larger})});
  const Value norm =
      b.op<"Mul">({larger, b.op<"Sqrt">({reduce(b, "ReduceSum", b.op<"Mul">({ratios, ratios}), last, true)})});
  // An infinite part makes the magnitude infinite, whatever the other (inf / inf is NaN).
  const Value magnitude = b.op<"Where">({b.op<"IsInf">({larger}), larger, norm});
  return b.op<"Squeeze">({magnitude, b.ints(last)});
}

}  // namespace manual
}  // namespace fastonnx
