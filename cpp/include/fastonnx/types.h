// Value types converters see: handles to graph values, torch scalar types, scalars, symbolic
// ints and ONNX attributes. Converter signatures are spelled in these types by codegen/api.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fastonnx/ids.h"

namespace fastonnx {

// A handle to a value in the graph (a 32-bit id into the graph's arena).
struct Value {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t id = kNone;
  bool valid() const { return id != kNone; }
  bool operator==(const Value& o) const { return id == o.id; }
  bool operator!=(const Value& o) const { return id != o.id; }
};

// An op input: a value, or absent (an omitted optional ONNX input: an invalid Value).
struct Input {
  Value value;
  Input(Value v) : value(v) {}                                       // NOLINT(google-explicit-constructor)
  Input(const std::optional<Value>& v) : value(v ? *v : Value{}) {}  // NOLINT
};
using Inputs = std::vector<Input>;

inline Inputs spread(const std::vector<Value>& values) { return Inputs(values.begin(), values.end()); }

// c10::ScalarType numbering, so torch dtypes cross the boundary as their own codes.
enum class ScalarType : int8_t {
  Undefined = -1,
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  ComplexHalf = 8,
  ComplexFloat = 9,
  ComplexDouble = 10,
  Bool = 11,
  BFloat16 = 15,
  Float8_e5m2 = 23,
  Float8_e4m3fn = 24,
  Float8_e5m2fnuz = 25,
  Float8_e4m3fnuz = 26,
  UInt16 = 27,
  UInt32 = 28,
  UInt64 = 29,
  UInt4 = 33,
  Int4 = 40,
};

bool is_floating(ScalarType t);
bool is_integral(ScalarType t);  // bool excluded
bool is_complex(ScalarType t);
// The type of the real and imaginary parts of a complex type (complex64 -> float32); other
// types are their own.
ScalarType real_part_type(ScalarType t);
// Bytes per element; 0 for a type whose elements are not whole bytes (int4, uint4), whose
// tensors only the writer computes (quantized_bytes.h): their byte length is byte_size's.
int element_size(ScalarType t);
int element_bits(ScalarType t);
// The bytes of `count` elements of `t` as ONNX stores them: 4-bit elements two to a byte.
size_t byte_size(ScalarType t, size_t count);
const char* dtype_name(ScalarType t);
// ONNX TensorProto.DataType of a torch dtype; throws ConvertError for dtypes ONNX cannot hold.
int onnx_dtype(ScalarType t);
ScalarType scalar_type_from_code(int64_t code);
ScalarType scalar_type_from_onnx(int onnx_code);

// A torch Scalar: an int, a float or a bool. Either a number known when exporting, or one the
// graph computes (a symbolic size, arithmetic on it, `.item()`): then `computed` is that 0-d
// value and the variant only says which kind of number it is.
struct Scalar {
  std::variant<int64_t, double, bool> v;
  Value computed;
  Scalar(int64_t i) : v(i) {}       // NOLINT
  Scalar(int i) : v(int64_t{i}) {}  // NOLINT
  Scalar(double d) : v(d) {}        // NOLINT
  Scalar(bool b) : v(b) {}          // NOLINT
  // A number the graph computes, as a 0-d value of element type `dtype`.
  static Scalar in_graph(Value value, ScalarType dtype);
  bool is_static() const { return !computed.valid(); }
  bool is_floating() const { return std::holds_alternative<double>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  // The number itself; a computed Scalar has none, so these throw a ConvertError for it (a
  // converter that needs the number must say so in its spec: `static:`).
  double to_double() const;
  int64_t to_int() const;
  // The dtype a Python scalar of this kind takes on its own (torch's defaults).
  ScalarType natural_dtype() const;
};
// Comparisons with a number are false for a computed Scalar (`alpha != 1` is true): a converter
// that special-cases a constant then takes its general path, which works for any value.
inline bool operator==(const Scalar& s, double d) { return s.is_static() && s.to_double() == d; }
inline bool operator!=(const Scalar& s, double d) { return !(s == d); }
inline bool operator==(const Scalar& s, int64_t i) { return s.is_static() && s.to_double() == static_cast<double>(i); }
inline bool operator!=(const Scalar& s, int64_t i) { return !(s == i); }

// A torch SymInt: a static int, or a scalar int64 graph value when the size is dynamic.
struct SymInt {
  int64_t value = 0;
  Value sym;
  SymInt(int64_t v) : value(v) {}  // NOLINT
  SymInt(int v) : value(v) {}      // NOLINT
  explicit SymInt(Value s) : sym(s) {}
  bool is_static() const { return !sym.valid(); }
};
using SymIntList = std::vector<SymInt>;
bool operator==(const SymIntList& a, const std::vector<int64_t>& b);
inline bool operator!=(const SymIntList& a, const std::vector<int64_t>& b) { return !(a == b); }

// An error in converting the graph (bad arguments, a case ONNX cannot express); the lowering
// adds which FX node it came from.
class ConvertError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The name of an attribute, interned in one pool for the whole process (attributes are made
// before they reach a graph, and their names are few): 32 bits, compared as an id.
class AttrName {
 public:
  AttrName(std::string_view name);                                         // NOLINT(google-explicit-constructor)
  AttrName(const char* name) : AttrName(std::string_view(name)) {}         // NOLINT
  AttrName(const std::string& name) : AttrName(std::string_view(name)) {}  // NOLINT
  std::string_view str() const;
  uint32_t id() const { return id_; }
  bool operator==(const AttrName& o) const { return id_ == o.id_; }

 private:
  uint32_t id_;
};

// An ONNX attribute: its name and one value of a kind. A Graph attribute (an If branch, a Loop
// or Scan body) names a subgraph of the same Graph; a TensorType one is a TypeProto of a tensor
// of that element type (Optional's `type`).
struct Attr {
  // In the order of the alternatives of `value`.
  enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Strings, Graph, TensorType };
  using Payload = std::variant<int64_t, double, std::string, std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, GraphId, ScalarType>;
  AttrName name;
  Payload value;

  Kind kind() const { return static_cast<Kind>(value.index()); }
  // The value of an attribute of the given kind (std::bad_variant_access for another kind).
  int64_t as_int() const { return std::get<int64_t>(value); }
  double as_float() const { return std::get<double>(value); }
  const std::string& as_string() const { return std::get<std::string>(value); }
  const std::vector<int64_t>& as_ints() const { return std::get<std::vector<int64_t>>(value); }
  const std::vector<double>& as_floats() const { return std::get<std::vector<double>>(value); }
  const std::vector<std::string>& as_strings() const { return std::get<std::vector<std::string>>(value); }
  GraphId as_graph() const { return std::get<GraphId>(value); }
  ScalarType as_tensor_type() const { return std::get<ScalarType>(value); }

  static Attr i(AttrName n, int64_t v) { return {n, v}; }
  static Attr f(AttrName n, double v) { return {n, v}; }
  static Attr f(AttrName n, const Scalar& v) { return f(n, v.to_double()); }
  static Attr s(AttrName n, std::string v) { return {n, std::move(v)}; }
  static Attr ints(AttrName n, std::vector<int64_t> v) { return {n, std::move(v)}; }
  static Attr floats(AttrName n, std::vector<double> v) { return {n, std::move(v)}; }
  static Attr strings(AttrName n, std::vector<std::string> v) { return {n, std::move(v)}; }
  static Attr graph(AttrName n, GraphId subgraph) { return {n, subgraph}; }
  static Attr tensor_type(AttrName n, ScalarType dtype) { return {n, dtype}; }
};
using Attrs = std::vector<Attr>;

// The attribute `name` among `attrs` (of a given kind when `kind` is set), or nullptr.
const Attr* find_attr(std::span<const Attr> attrs, AttrName name, std::optional<Attr::Kind> kind = std::nullopt);
// The value of Int (Float) attribute `name` among `attrs`, or `fallback` (ONNX's default) when absent.
int64_t attr_int(std::span<const Attr> attrs, AttrName name, int64_t fallback);
double attr_float(std::span<const Attr> attrs, AttrName name, double fallback);

}  // namespace fastonnx
