#include "fastonnx/convert_kernels.h"

#include <algorithm>
#include <cstring>

#include "fastonnx/numeric.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FASTONNX_X86_KERNELS 1
#include <immintrin.h>
#endif

namespace fastonnx {
namespace {

// Elements staged as floats at a time: 4 KB, so that a block read stays in L1 until written.
constexpr size_t kBlock = 1024;

using LoadFloats = void (*)(const uint8_t* in, float* out, size_t n);
using StoreFloats = void (*)(const float* in, uint8_t* out, size_t n);

void load_float(const uint8_t* in, float* out, size_t n) { std::memmove(out, in, n * 4); }

void load_half(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = half_to_float(load_unaligned<uint16_t>(in + 2 * i));
}

void load_bfloat16(const uint8_t* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bfloat16_to_float(load_unaligned<uint16_t>(in + 2 * i));
}

void store_float(const float* in, uint8_t* out, size_t n) { std::memmove(out, in, n * 4); }

void store_half(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = float_to_half(in[i]);
    std::memcpy(out + 2 * i, &h, 2);
  }
}

void store_bfloat16(const float* in, uint8_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const uint16_t b = float_to_bfloat16(in[i]);
    std::memcpy(out + 2 * i, &b, 2);
  }
}

#ifdef FASTONNX_X86_KERNELS
// Eight elements at a time; the scalar functions take the tail. AVX2 and F16C are chosen at run
// time (target attributes), so the wheel still runs on a CPU without them.

__attribute__((target("avx2,f16c"))) void load_half_f16c(const uint8_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i))));
  }
  load_half(in + 2 * i, out + i, n - i);
}

// A bfloat16 is the high half of a float.
__attribute__((target("avx2"))) void load_bfloat16_avx2(const uint8_t* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_slli_epi32(wide, 16));
  }
  load_bfloat16(in + 2 * i, out + i, n - i);
}

// The hardware conversion rounds to nearest even, overflows to infinity and keeps subnormals,
// as float_to_half does (MXCSR's flush-to-zero does not apply to it).
__attribute__((target("avx2,f16c"))) void store_half_f16c(const float* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), h);
  }
  store_half(in + i, out + 2 * i, n - i);
}

// float_to_bfloat16 on eight lanes: add 0x7FFF plus the lowest kept bit (round to nearest even),
// keep the high half; a NaN becomes the quiet NaN 0x7FC0.
__attribute__((target("avx2"))) void store_bfloat16_avx2(const float* in, uint8_t* out, size_t n) {
  const __m256i bias = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1);
  const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF), infinity = _mm256_set1_epi32(0x7F800000);
  const __m256i quiet_nan = _mm256_set1_epi32(0x7FC0);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs_mask), infinity);
    const __m256i b = _mm256_blendv_epi8(rounded, quiet_nan, nan);
    // 32-bit lanes to 16 bits: packus works within 128-bit halves; the permute brings the two
    // halves' results together in the low 128 bits.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(b, b), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm256_castsi256_si128(packed));
  }
  store_bfloat16(in + i, out + 2 * i, n - i);
}

bool has_avx2_f16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#endif

LoadFloats loader(ScalarType t) {
#ifdef FASTONNX_X86_KERNELS
  if (has_avx2_f16c() && t == ScalarType::Half) return load_half_f16c;
  if (has_avx2_f16c() && t == ScalarType::BFloat16) return load_bfloat16_avx2;
#endif
  return t == ScalarType::Float ? load_float : t == ScalarType::Half ? load_half : load_bfloat16;
}

StoreFloats storer(ScalarType t) {
#ifdef FASTONNX_X86_KERNELS
  if (has_avx2_f16c() && t == ScalarType::Half) return store_half_f16c;
  if (has_avx2_f16c() && t == ScalarType::BFloat16) return store_bfloat16_avx2;
#endif
  return t == ScalarType::Float ? store_float : t == ScalarType::Half ? store_half : store_bfloat16;
}

}  // namespace

bool is_streamed_float(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Half || t == ScalarType::BFloat16;
}

void convert_floats(ScalarType from, const uint8_t* in, ScalarType to, uint8_t* out, size_t count) {
  const LoadFloats load = loader(from);
  const StoreFloats store = storer(to);
  const size_t is = static_cast<size_t>(element_size(from)), os = static_cast<size_t>(element_size(to));
  float block[kBlock];
  for (size_t at = 0; at < count; at += kBlock) {
    const size_t n = std::min(kBlock, count - at);
    load(in + at * is, block, n);
    store(block, out + at * os, n);
  }
}

}  // namespace fastonnx
