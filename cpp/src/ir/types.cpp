#include "fastonnx/types.h"

#include <cstdio>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

namespace fastonnx {

bool is_floating(ScalarType t) {
  switch (t) {
    case ScalarType::Half:
    case ScalarType::Float:
    case ScalarType::Double:
    case ScalarType::BFloat16:
    case ScalarType::Float8_e5m2:
    case ScalarType::Float8_e4m3fn:
    case ScalarType::Float8_e5m2fnuz:
    case ScalarType::Float8_e4m3fnuz:
      return true;
    default:
      return false;
  }
}

bool is_integral(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
    case ScalarType::Char:
    case ScalarType::Short:
    case ScalarType::Int:
    case ScalarType::Long:
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64:
      return true;
    default:
      return false;
  }
}

bool is_complex(ScalarType t) {
  return t == ScalarType::ComplexHalf || t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble;
}

ScalarType real_part_type(ScalarType t) {
  switch (t) {
    case ScalarType::ComplexHalf:
      return ScalarType::Half;
    case ScalarType::ComplexFloat:
      return ScalarType::Float;
    case ScalarType::ComplexDouble:
      return ScalarType::Double;
    default:
      return t;
  }
}

namespace {
struct DtypeRow {
  ScalarType torch;
  int onnx;  // TensorProto.DataType, 0 when ONNX has no such type
  int bits;
  const char* name;
};
// ONNX codes from onnx.proto's TensorProto.DataType.
constexpr DtypeRow kDtypes[] = {
    {ScalarType::Byte, 2, 8, "uint8"},
    {ScalarType::Char, 3, 8, "int8"},
    {ScalarType::Short, 5, 16, "int16"},
    {ScalarType::Int, 6, 32, "int32"},
    {ScalarType::Long, 7, 64, "int64"},
    {ScalarType::Half, 10, 16, "float16"},
    {ScalarType::Float, 1, 32, "float32"},
    {ScalarType::Double, 11, 64, "float64"},
    {ScalarType::ComplexHalf, 0, 32, "complex32"},
    {ScalarType::ComplexFloat, 14, 64, "complex64"},
    {ScalarType::ComplexDouble, 15, 128, "complex128"},
    {ScalarType::Bool, 9, 8, "bool"},
    {ScalarType::BFloat16, 16, 16, "bfloat16"},
    {ScalarType::Float8_e5m2, 19, 8, "float8_e5m2"},
    {ScalarType::Float8_e4m3fn, 17, 8, "float8_e4m3fn"},
    {ScalarType::Float8_e5m2fnuz, 20, 8, "float8_e5m2fnuz"},
    {ScalarType::Float8_e4m3fnuz, 18, 8, "float8_e4m3fnuz"},
    {ScalarType::UInt16, 4, 16, "uint16"},
    {ScalarType::UInt32, 12, 32, "uint32"},
    {ScalarType::UInt64, 13, 64, "uint64"},
    {ScalarType::UInt4, 21, 4, "uint4"},
    {ScalarType::Int4, 22, 4, "int4"},
};

const DtypeRow* row(ScalarType t) {
  for (const auto& r : kDtypes) {
    if (r.torch == t) return &r;
  }
  return nullptr;
}
}  // namespace

int element_size(ScalarType t) { return element_bits(t) / 8; }

int element_bits(ScalarType t) {
  const DtypeRow* r = row(t);
  return r ? r->bits : 0;
}

size_t byte_size(ScalarType t, size_t count) { return (count * static_cast<size_t>(element_bits(t)) + 7) / 8; }

const char* dtype_name(ScalarType t) {
  const DtypeRow* r = row(t);
  return r ? r->name : "undefined";
}

int onnx_dtype(ScalarType t) {
  const DtypeRow* r = row(t);
  if (r == nullptr || r->onnx == 0) {
    throw ConvertError(std::string("dtype ") + dtype_name(t) + " has no ONNX equivalent");
  }
  return r->onnx;
}

ScalarType scalar_type_from_code(int64_t code) {
  for (const auto& r : kDtypes) {
    if (static_cast<int64_t>(r.torch) == code) return r.torch;
  }
  throw ConvertError("unknown torch dtype code " + std::to_string(code));
}

ScalarType scalar_type_from_onnx(int onnx_code) {
  for (const auto& r : kDtypes) {
    if (r.onnx == onnx_code) return r.torch;
  }
  throw ConvertError("ONNX data type " + std::to_string(onnx_code) + " has no torch dtype");
}

Scalar Scalar::in_graph(Value value, ScalarType dtype) {
  Scalar s = dtype == ScalarType::Bool      ? Scalar(false)
             : fastonnx::is_floating(dtype) ? Scalar(0.0)
                                            : Scalar(int64_t{0});
  s.computed = value;
  return s;
}

namespace {
void require_static(const Scalar& s) {
  if (!s.is_static()) {
    throw ConvertError(
        "a number computed in the graph (a symbolic size or .item()) reaches an argument this "
        "converter needs as a constant");
  }
}
}  // namespace

double Scalar::to_double() const {
  require_static(*this);
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* d = std::get_if<double>(&v)) return *d;
  return std::get<bool>(v) ? 1.0 : 0.0;
}

int64_t Scalar::to_int() const {
  require_static(*this);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* d = std::get_if<double>(&v)) {
    // [-2^63, 2^63) holds every double an int64 can take; outside it (or NaN) the cast is undefined.
    if (!(*d >= -9223372036854775808.0 && *d < 9223372036854775808.0)) {
      char text[32];
      std::snprintf(text, sizeof text, "%g", *d);
      throw ConvertError(std::string("the number ") + text + " has no int64 value");
    }
    return static_cast<int64_t>(*d);
  }
  return std::get<bool>(v) ? 1 : 0;
}

ScalarType Scalar::natural_dtype() const {
  if (is_bool()) return ScalarType::Bool;
  return is_floating() ? ScalarType::Float : ScalarType::Long;
}

bool operator==(const SymIntList& a, const std::vector<int64_t>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].is_static() || a[i].value != b[i]) return false;
  }
  return true;
}

namespace {
// The process's attribute names (AttrName): interned once, read by any thread.
struct AttrNamePool {
  std::shared_mutex mutex;
  std::deque<std::string> storage;
  std::vector<std::string_view> names;
  std::unordered_map<std::string_view, uint32_t> ids;
};
AttrNamePool& attr_names() {
  static AttrNamePool pool;
  return pool;
}
}  // namespace

AttrName::AttrName(std::string_view name) {
  AttrNamePool& pool = attr_names();
  {
    std::shared_lock read(pool.mutex);
    if (auto it = pool.ids.find(name); it != pool.ids.end()) {
      id_ = it->second;
      return;
    }
  }
  std::unique_lock write(pool.mutex);
  if (auto it = pool.ids.find(name); it != pool.ids.end()) {  // interned meanwhile
    id_ = it->second;
    return;
  }
  id_ = static_cast<uint32_t>(pool.names.size());
  pool.names.push_back(pool.storage.emplace_back(name));
  pool.ids.emplace(pool.names.back(), id_);  // keyed by the pool's copy, not the caller's string
}

std::string_view AttrName::str() const {
  AttrNamePool& pool = attr_names();
  std::shared_lock read(pool.mutex);
  return pool.names[id_];
}

const Attr* find_attr(std::span<const Attr> attrs, AttrName name, std::optional<Attr::Kind> kind) {
  for (const Attr& a : attrs) {
    if (a.name == name && (!kind || a.kind() == *kind)) return &a;
  }
  return nullptr;
}

int64_t attr_int(std::span<const Attr> attrs, AttrName name, int64_t fallback) {
  const Attr* a = find_attr(attrs, name, Attr::Kind::Int);
  return a ? a->as_int() : fallback;
}

double attr_float(std::span<const Attr> attrs, AttrName name, double fallback) {
  const Attr* a = find_attr(attrs, name, Attr::Kind::Float);
  return a ? a->as_float() : fallback;
}

}  // namespace fastonnx
