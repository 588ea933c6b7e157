#include "fastonnx/transpose_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define FASTONNX_X86_KERNELS 1
#include <immintrin.h>
#endif

namespace fastonnx {

#ifdef FASTONNX_X86_KERNELS
namespace {

// 8x8 32-bit elements in AVX registers: pairs interleaved, then quads, then 128-bit halves
// swapped across. AVX is chosen at run time (target attribute) so the wheel still runs on a
// CPU without it; SSE2, used for 16-bit elements, is part of x86-64 itself.
__attribute__((target("avx"))) void strip32_avx(const uint8_t* src_bytes, size_t ss, uint8_t* dst_bytes, size_t ds,
                                                size_t cols) {
  const float* src = reinterpret_cast<const float*>(src_bytes);
  float* dst = reinterpret_cast<float*>(dst_bytes);
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
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
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(s0, s4, 0x20));
    _mm256_storeu_ps(dst + ds, _mm256_permute2f128_ps(s1, s5, 0x20));
    _mm256_storeu_ps(dst + 2 * ds, _mm256_permute2f128_ps(s2, s6, 0x20));
    _mm256_storeu_ps(dst + 3 * ds, _mm256_permute2f128_ps(s3, s7, 0x20));
    _mm256_storeu_ps(dst + 4 * ds, _mm256_permute2f128_ps(s0, s4, 0x31));
    _mm256_storeu_ps(dst + 5 * ds, _mm256_permute2f128_ps(s1, s5, 0x31));
    _mm256_storeu_ps(dst + 6 * ds, _mm256_permute2f128_ps(s2, s6, 0x31));
    _mm256_storeu_ps(dst + 7 * ds, _mm256_permute2f128_ps(s3, s7, 0x31));
  }
}

// 8x8 16-bit elements (float16, bfloat16) in SSE2 registers: 16-, 32- then 64-bit interleaves.
void strip16_sse2(const uint8_t* src_bytes, size_t ss, uint8_t* dst_bytes, size_t ds, size_t cols) {
  const uint16_t* src = reinterpret_cast<const uint16_t*>(src_bytes);
  uint16_t* dst = reinterpret_cast<uint16_t*>(dst_bytes);
  const auto load = [](const uint16_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); };
  const auto store = [](uint16_t* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); };
  for (size_t j = 0; j < cols; j += 8, src += 8, dst += 8 * ds) {
    const __m128i a0 = load(src), a1 = load(src + ss), a2 = load(src + 2 * ss), a3 = load(src + 3 * ss),
                  a4 = load(src + 4 * ss), a5 = load(src + 5 * ss), a6 = load(src + 6 * ss), a7 = load(src + 7 * ss);
    const __m128i b0 = _mm_unpacklo_epi16(a0, a1), b1 = _mm_unpackhi_epi16(a0, a1), b2 = _mm_unpacklo_epi16(a2, a3),
                  b3 = _mm_unpackhi_epi16(a2, a3), b4 = _mm_unpacklo_epi16(a4, a5), b5 = _mm_unpackhi_epi16(a4, a5),
                  b6 = _mm_unpacklo_epi16(a6, a7), b7 = _mm_unpackhi_epi16(a6, a7);
    const __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2), c2 = _mm_unpacklo_epi32(b1, b3),
                  c3 = _mm_unpackhi_epi32(b1, b3), c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6),
                  c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
    store(dst, _mm_unpacklo_epi64(c0, c4));
    store(dst + ds, _mm_unpackhi_epi64(c0, c4));
    store(dst + 2 * ds, _mm_unpacklo_epi64(c1, c5));
    store(dst + 3 * ds, _mm_unpackhi_epi64(c1, c5));
    store(dst + 4 * ds, _mm_unpacklo_epi64(c2, c6));
    store(dst + 5 * ds, _mm_unpackhi_epi64(c2, c6));
    store(dst + 6 * ds, _mm_unpacklo_epi64(c3, c7));
    store(dst + 7 * ds, _mm_unpackhi_epi64(c3, c7));
  }
}

}  // namespace

TransposeStrip transpose_strip_kernel(int element_size) {
  static const bool avx = __builtin_cpu_supports("avx");
  if (element_size == 4 && avx) return strip32_avx;
  if (element_size == 2) return strip16_sse2;
  return nullptr;
}
#else
TransposeStrip transpose_strip_kernel(int) { return nullptr; }
#endif

}  // namespace fastonnx
