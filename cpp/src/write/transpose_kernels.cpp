#include "fastonnx/transpose_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FASTONNX_X86_KERNELS 1
#include <immintrin.h>
#endif

namespace fastonnx {

#ifdef FASTONNX_X86_KERNELS
namespace {

bool streamable(const void* dst, size_t row_bytes) {
  return reinterpret_cast<uintptr_t>(dst) % kTransposeAlignment == 0 && row_bytes % kTransposeAlignment == 0;
}

// 8x8 32-bit elements in AVX registers: pairs interleaved, then quads, then 128-bit halves
// swapped across; out[i] is column i of the tile. AVX is chosen at run time (target attribute)
// so the wheel still runs on a CPU without it; SSE2, used for 16-bit elements, is part of x86-64.
__attribute__((target("avx"), always_inline)) inline void tile32(const float* src, size_t ss, __m256 out[8]) {
  const __m256 r0 = _mm256_loadu_ps(src), r1 = _mm256_loadu_ps(src + ss), r2 = _mm256_loadu_ps(src + 2 * ss),
               r3 = _mm256_loadu_ps(src + 3 * ss), r4 = _mm256_loadu_ps(src + 4 * ss),
               r5 = _mm256_loadu_ps(src + 5 * ss), r6 = _mm256_loadu_ps(src + 6 * ss),
               r7 = _mm256_loadu_ps(src + 7 * ss);
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
               t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0)),
               s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2)),
               s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0)),
               s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2)),
               s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0)),
               s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2)),
               s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0)),
               s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  out[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  out[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  out[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  out[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  out[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  out[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  out[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  out[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

__attribute__((target("avx"))) void strip32_avx(const uint8_t* src_bytes, size_t ss, uint8_t* dst_bytes, size_t ds,
                                                size_t cols) {
  const float* src = reinterpret_cast<const float*>(src_bytes);
  float* dst = reinterpret_cast<float*>(dst_bytes);
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
    __m256 t[8];
    tile32(src, ss, t);
    for (size_t i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ds, t[i]);
  }
}

// 16 rows: two tiles, whose columns make each output row's 64 bytes.
template <bool kStream>
__attribute__((target("avx"))) void band32(const float* src, size_t ss, float* dst, size_t ds, size_t cols) {
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
    __m256 a[8], b[8];
    tile32(src, ss, a);
    tile32(src + 8 * ss, ss, b);
    for (size_t i = 0; i < 8; ++i) {
      if constexpr (kStream) {
        _mm256_stream_ps(dst + i * ds, a[i]);
        _mm256_stream_ps(dst + i * ds + 8, b[i]);
      } else {
        _mm256_storeu_ps(dst + i * ds, a[i]);
        _mm256_storeu_ps(dst + i * ds + 8, b[i]);
      }
    }
  }
}

__attribute__((target("avx"))) void band32_avx(const uint8_t* src, size_t ss, uint8_t* dst, size_t ds, size_t cols) {
  if (streamable(dst, ds * 4)) {
    band32<true>(reinterpret_cast<const float*>(src), ss, reinterpret_cast<float*>(dst), ds, cols);
    _mm_sfence();  // the streamed stores reach memory before the chunk is handed to the writer
  } else {
    band32<false>(reinterpret_cast<const float*>(src), ss, reinterpret_cast<float*>(dst), ds, cols);
  }
}

// 8x8 16-bit elements (float16, bfloat16) in SSE2 registers: 16-, 32- then 64-bit interleaves.
inline void tile16(const uint16_t* src, size_t ss, __m128i out[8]) {
  const auto load = [](const uint16_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  const __m128i a0 = load(src), a1 = load(src + ss), a2 = load(src + 2 * ss), a3 = load(src + 3 * ss),
                a4 = load(src + 4 * ss), a5 = load(src + 5 * ss), a6 = load(src + 6 * ss), a7 = load(src + 7 * ss);
  const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1), b2 = _mm_unpacklo_epi16(a2, a3),
                b3 = _mm_unpackhi_epi16(a2, a3), b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5),
                b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
  const __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2), c2 = _mm_unpacklo_epi32(b1, b3),
                c3 = _mm_unpackhi_epi32(b1, b3), c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6),
                c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
  out[0] = _mm_unpacklo_epi64(c0, c4);
  out[1] = _mm_unpackhi_epi64(c0, c4);
  out[2] = _mm_unpacklo_epi64(c1, c5);
  out[3] = _mm_unpackhi_epi64(c1, c5);
  out[4] = _mm_unpacklo_epi64(c2, c6);
  out[5] = _mm_unpackhi_epi64(c2, c6);
  out[6] = _mm_unpacklo_epi64(c3, c7);
  out[7] = _mm_unpackhi_epi64(c3, c7);
}

void strip16_sse2(const uint8_t* src_bytes, size_t ss, uint8_t* dst_bytes, size_t ds, size_t cols) {
  const uint16_t* src = reinterpret_cast<const uint16_t*>(src_bytes);
  uint16_t* dst = reinterpret_cast<uint16_t*>(dst_bytes);
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
    __m128i t[8];
    tile16(src, ss, t);
    for (size_t i = 0; i < 8; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i * ds), t[i]);
  }
}

// 32 rows: four tiles, whose columns make each output row's 64 bytes.
template <bool kStream>
void band16(const uint16_t* src, size_t ss, uint16_t* dst, size_t ds, size_t cols) {
  constexpr size_t kTiles = 4;
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
    __m128i t[kTiles][8];
    for (size_t k = 0; k < kTiles; ++k) tile16(src + 8 * k * ss, ss, t[k]);
    for (size_t i = 0; i < 8; ++i) {
      for (size_t k = 0; k < kTiles; ++k) {
        auto* out = reinterpret_cast<__m128i*>(dst + i * ds + 8 * k);
        if constexpr (kStream) {
          _mm_stream_si128(out, t[k][i]);
        } else {
          _mm_storeu_si128(out, t[k][i]);
        }
      }
    }
  }
}

void band16_sse2(const uint8_t* src, size_t ss, uint8_t* dst, size_t ds, size_t cols) {
  if (streamable(dst, ds * 2)) {
    band16<true>(reinterpret_cast<const uint16_t*>(src), ss, reinterpret_cast<uint16_t*>(dst), ds, cols);
    _mm_sfence();  // the streamed stores reach memory before the chunk is handed to the writer
  } else {
    band16<false>(reinterpret_cast<const uint16_t*>(src), ss, reinterpret_cast<uint16_t*>(dst), ds, cols);
  }
}

}  // namespace

TransposeKernels transpose_kernels(int element_size) {
  static const bool avx = __builtin_cpu_supports("avx");
  if (element_size == 4 && avx) return {strip32_avx, band32_avx, kTransposeLine / 4};
  if (element_size == 2) return {strip16_sse2, band16_sse2, kTransposeLine / 2};
  return {};
}
#else
TransposeKernels transpose_kernels(int) { return {}; }
#endif

}  // namespace fastonnx
