// Reading and writing single elements of every dtype the core computes with, as ONNX converts
// between them (Cast): 16-bit floats round to nearest even, floats to ints truncate toward zero.
#pragma once

#include <cstdint>
#include <cstring>

#include "fastonnx/types.h"

namespace fastonnx {

// The element of type T at `p`, which may be unaligned (torch memory, packed bytes).
template <typename T>
T load_unaligned(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);

// Whether elements of `t` can be read and written by the functions below.
bool is_numeric(ScalarType t);
// The element at `p` of type `t`, as a double or (exactly, for integers) as an int64.
double load_double(ScalarType t, const void* p);
int64_t load_int(ScalarType t, const void* p);
// Writes `v` to `p` as an element of type `t`.
void store_double(ScalarType t, void* p, double v);
void store_int(ScalarType t, void* p, int64_t v);
// Converts one element from type `from` at `src` to type `to` at `dst` (exact for int to int).
void convert_element(ScalarType from, const void* src, ScalarType to, void* dst);

}  // namespace fastonnx
