// Value types converters see: handles to graph values, torch scalar types, scalars, symbolic
// ints and ONNX attributes. Converter signatures are spelled in these types by codegen/api.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

namespace fastonnx {

// A handle to a value in the graph (a 32-bit id into the graph's arena).
struct Value {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t id = kNone;
  bool valid() const { return id != kNone; }
  bool operator==(const Value& o) const { return id == o.id; }
  bool operator!=(const Value& o) const { return id != o.id; }
};

// An op input: a value, or absent (an omitted optional ONNX input).
struct Input {
  uint32_t id = Value::kNone;
  Input(Value v) : id(v.id) {}  // NOLINT(google-explicit-constructor)
  Input(const std::optional<Value>& v) : id(v ? v->id : Value::kNone) {}  // NOLINT
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
};

bool is_floating(ScalarType t);
bool is_integral(ScalarType t);  // bool excluded
bool is_complex(ScalarType t);
// The type of the real and imaginary parts of a complex type (complex64 -> float32); other
// types are their own.
ScalarType real_part_type(ScalarType t);
int element_size(ScalarType t);
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
  Scalar(int64_t i) : v(i) {}  // NOLINT
  Scalar(int i) : v(int64_t{i}) {}  // NOLINT
  Scalar(double d) : v(d) {}  // NOLINT
  Scalar(bool b) : v(b) {}  // NOLINT
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
  SymInt(int v) : value(v) {}  // NOLINT
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

// An ONNX attribute. A Graph attribute (an If branch, a Loop or Scan body) holds the id of a
// subgraph of the same Graph in `int_value`.
struct Attr {
  enum class Kind : uint8_t { Int, Float, String, Ints, Floats, Strings, Graph };
  std::string name;
  Kind kind = Kind::Int;
  int64_t int_value = 0;
  double float_value = 0;
  std::string string_value;
  std::vector<int64_t> int_values;
  std::vector<double> float_values;
  std::vector<std::string> string_values;

  static Attr i(std::string n, int64_t v);
  static Attr f(std::string n, double v);
  static Attr f(std::string n, const Scalar& v) { return f(std::move(n), v.to_double()); }
  static Attr s(std::string n, std::string v);
  static Attr ints(std::string n, std::vector<int64_t> v);
  static Attr floats(std::string n, std::vector<double> v);
  static Attr strings(std::string n, std::vector<std::string> v);
  static Attr graph(std::string n, uint32_t subgraph);
};
using Attrs = std::vector<Attr>;

}  // namespace fastonnx
