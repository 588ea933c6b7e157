#include "fastonnx/numeric.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace fastonnx {

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t mantissa = x & 0x007FFFFFu;
  const int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  if (((x >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00u | (mantissa ? 0x200u : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10) return static_cast<uint16_t>(sign);
    const uint32_t m = mantissa | 0x00800000u;
    const int shift = 14 - exp;
    uint32_t half = m >> shift;
    const uint32_t rest = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 127 - 15) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mantissa & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

namespace {
template <typename T>
void write(void* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
// C++ leaves a float-to-int conversion out of range (or of NaN) undefined; x86's conversion
// instruction, which torch and onnxruntime use, gives INT64_MIN.
int64_t truncate(double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) return INT64_MIN;
  return static_cast<int64_t>(v);
}
[[noreturn]] void unsupported(ScalarType t) {
  throw ConvertError(std::string("elements of dtype ") + dtype_name(t) + " cannot be computed with");
}
}  // namespace

bool is_numeric(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::Half:
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::Bool:
    case ScalarType::BFloat16:
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64:
      return true;
    default:
      return false;
  }
}

double load_double(ScalarType t, const void* p) {
  switch (t) {
    case ScalarType::Half:
      return half_to_float(load_unaligned<uint16_t>(p));
    case ScalarType::BFloat16:
      return bfloat16_to_float(load_unaligned<uint16_t>(p));
    case ScalarType::Float:
      return load_unaligned<float>(p);
    case ScalarType::Double:
      return load_unaligned<double>(p);
    case ScalarType::UInt64:
      return static_cast<double>(load_unaligned<uint64_t>(p));
    default:
      return static_cast<double>(load_int(t, p));
  }
}

int64_t load_int(ScalarType t, const void* p) {
  switch (t) {
    case ScalarType::Bool:
      return load_unaligned<uint8_t>(p) != 0;
    case ScalarType::Byte:
      return load_unaligned<uint8_t>(p);
    case ScalarType::Char:
      return load_unaligned<int8_t>(p);
    case ScalarType::Short:
      return load_unaligned<int16_t>(p);
    case ScalarType::Int:
      return load_unaligned<int32_t>(p);
    case ScalarType::Long:
      return load_unaligned<int64_t>(p);
    case ScalarType::UInt16:
      return load_unaligned<uint16_t>(p);
    case ScalarType::UInt32:
      return load_unaligned<uint32_t>(p);
    case ScalarType::UInt64:
      return static_cast<int64_t>(load_unaligned<uint64_t>(p));
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Float:
    case ScalarType::Double:
      return truncate(load_double(t, p));
    default:
      unsupported(t);
  }
}

void store_double(ScalarType t, void* p, double v) {
  switch (t) {
    case ScalarType::Half:
      write(p, float_to_half(static_cast<float>(v)));
      break;
    case ScalarType::BFloat16:
      write(p, float_to_bfloat16(static_cast<float>(v)));
      break;
    case ScalarType::Float:
      write(p, static_cast<float>(v));
      break;
    case ScalarType::Double:
      write(p, v);
      break;
    case ScalarType::Bool:
      write<uint8_t>(p, v != 0.0);
      break;
    default:
      store_int(t, p, truncate(v));
      break;
  }
}

void store_int(ScalarType t, void* p, int64_t v) {
  switch (t) {
    case ScalarType::Bool:
      write<uint8_t>(p, v != 0);
      break;
    case ScalarType::Byte:
      write(p, static_cast<uint8_t>(v));
      break;
    case ScalarType::Char:
      write(p, static_cast<int8_t>(v));
      break;
    case ScalarType::Short:
      write(p, static_cast<int16_t>(v));
      break;
    case ScalarType::Int:
      write(p, static_cast<int32_t>(v));
      break;
    case ScalarType::Long:
      write(p, v);
      break;
    case ScalarType::UInt16:
      write(p, static_cast<uint16_t>(v));
      break;
    case ScalarType::UInt32:
      write(p, static_cast<uint32_t>(v));
      break;
    case ScalarType::UInt64:
      write(p, static_cast<uint64_t>(v));
      break;
    case ScalarType::Half:
    case ScalarType::BFloat16:
    case ScalarType::Float:
    case ScalarType::Double:
      store_double(t, p, static_cast<double>(v));
      break;
    default:
      unsupported(t);
  }
}

void convert_element(ScalarType from, const void* src, ScalarType to, void* dst) {
  if (is_floating(from) || (from == ScalarType::UInt64 && is_floating(to))) {
    store_double(to, dst, load_double(from, src));
  } else {
    store_int(to, dst, load_int(from, src));
  }
}

}  // namespace fastonnx
