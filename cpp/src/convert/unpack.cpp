#include "fastonnx/unpack.h"

namespace fastonnx {

const char* Arg::kind_name() const {
  switch (kind) {
    case Kind::Missing:
      return "nothing";
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "a bool";
    case Kind::Int:
      return "an int";
    case Kind::Float:
      return "a float";
    case Kind::Str:
      return "a string";
    case Kind::Value:
      return "a tensor";
    case Kind::List:
      return "a list";
  }
  return "?";
}

const Arg& arg_at(const Args& args, size_t i) {
  static const Arg kMissing{};
  return i < args.size() ? args[i] : kMissing;
}

bool given(const Args& args, size_t i) { return i < args.size() && args[i].kind != Arg::Kind::Missing; }

namespace {
[[noreturn]] void wrong(const Arg& a, const char* what, const char* expected) {
  throw ConvertError(std::string("argument `") + what + "`: expected " + expected + ", got " + a.kind_name());
}

bool is_none(const Arg& a) { return a.kind == Arg::Kind::None || a.kind == Arg::Kind::Missing; }

template <typename T, typename F>
std::vector<T> unpack_list(const Arg& a, const char* what, int size, F item) {
  std::vector<T> out;
  if (a.kind != Arg::Kind::List) {
    if (size > 0) {
      out.assign(size, item(a));  // `int[2] stride=1` given as a plain int
      return out;
    }
    wrong(a, what, "a list");
  }
  // torch's kernels take `int[N]` as N values, one value for all N, or (pooling strides) none.
  if (size > 1 && a.items.size() > 1 && a.items.size() != static_cast<size_t>(size)) {
    throw ConvertError(std::string("argument `") + what + "`: expected " + std::to_string(size) +
                       " values (or one), got " + std::to_string(a.items.size()));
  }
  out.reserve(a.items.size());
  for (const Arg& x : a.items) out.push_back(item(x));
  if (size > 1 && out.size() == 1) out.assign(size, out[0]);
  return out;
}
}  // namespace

Value unpack_tensor(Builder& b, const Arg& a, const char* what) {
  switch (a.kind) {
    case Arg::Kind::Value:
      return Value{static_cast<uint32_t>(a.i)};
    case Arg::Kind::Int:
      return b.scalar(Scalar(a.i), ScalarType::Long);
    case Arg::Kind::Bool:
      return b.scalar(Scalar(a.i != 0), ScalarType::Bool);
    case Arg::Kind::Float:
      return b.scalar(Scalar(a.f), ScalarType::Float);
    default:
      wrong(a, what, "a tensor");
  }
}

std::optional<Value> unpack_opt_tensor(Builder& b, const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_tensor(b, a, what);
}

std::vector<Value> unpack_tensor_list(Builder& b, const Arg& a, const char* what) {
  return unpack_list<Value>(a, what, 0, [&](const Arg& x) { return unpack_tensor(b, x, what); });
}

std::vector<std::optional<Value>> unpack_opt_tensor_list(Builder& b, const Arg& a, const char* what) {
  return unpack_list<std::optional<Value>>(a, what, 0, [&](const Arg& x) { return unpack_opt_tensor(b, x, what); });
}

int64_t unpack_int(const Arg& a, const char* what) {
  if (a.kind != Arg::Kind::Int && a.kind != Arg::Kind::Bool) wrong(a, what, "an int");
  return a.i;
}

std::optional<int64_t> unpack_opt_int(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_int(a, what);
}

SymInt unpack_symint(const Arg& a, const char* what) {
  if (a.kind == Arg::Kind::Value) return SymInt(Value{static_cast<uint32_t>(a.i)});
  return SymInt(unpack_int(a, what));
}

std::optional<SymInt> unpack_opt_symint(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_symint(a, what);
}

double unpack_float(const Arg& a, const char* what) {
  if (a.kind == Arg::Kind::Float) return a.f;
  if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Bool) return static_cast<double>(a.i);
  wrong(a, what, "a float");
}

std::optional<double> unpack_opt_float(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_float(a, what);
}

bool unpack_bool(const Arg& a, const char* what) {
  if (a.kind != Arg::Kind::Bool && a.kind != Arg::Kind::Int) wrong(a, what, "a bool");
  return a.i != 0;
}

std::optional<bool> unpack_opt_bool(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_bool(a, what);
}

std::string unpack_str(const Arg& a, const char* what) {
  if (a.kind != Arg::Kind::Str) wrong(a, what, "a string");
  return a.s;
}

std::optional<std::string> unpack_opt_str(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_str(a, what);
}

Scalar unpack_scalar(Builder& b, const Arg& a, const char* what) {
  switch (a.kind) {
    case Arg::Kind::Int:
      return Scalar(a.i);
    case Arg::Kind::Bool:
      return Scalar(a.i != 0);
    case Arg::Kind::Float:
      return Scalar(a.f);
    case Arg::Kind::Value: {
      // A symbolic number (SymInt, SymFloat, SymBool, `.item()`): a 0-d value of the graph.
      Value v{static_cast<uint32_t>(a.i)};
      if (b.has_shape(v) && b.rank(v) != 0) v = b.op<"Reshape">({v, b.ints(std::vector<int64_t>{})});
      return Scalar::in_graph(v, b.dtype(v));
    }
    default:
      wrong(a, what, "a number");
  }
}

std::optional<Scalar> unpack_opt_scalar(Builder& b, const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_scalar(b, a, what);
}

ScalarType unpack_scalar_type(const Arg& a, const char* what) {
  if (a.kind != Arg::Kind::Int) wrong(a, what, "a dtype");
  return scalar_type_from_code(a.i);
}

std::optional<ScalarType> unpack_opt_scalar_type(const Arg& a, const char* what) {
  if (is_none(a)) return std::nullopt;
  return unpack_scalar_type(a, what);
}

std::vector<int64_t> unpack_int_list(const Arg& a, const char* what, int size) {
  return unpack_list<int64_t>(a, what, size, [&](const Arg& x) { return unpack_int(x, what); });
}

std::optional<std::vector<int64_t>> unpack_opt_int_list(const Arg& a, const char* what, int size) {
  if (is_none(a)) return std::nullopt;
  return unpack_int_list(a, what, size);
}

SymIntList unpack_symint_list(const Arg& a, const char* what, int size) {
  return unpack_list<SymInt>(a, what, size, [&](const Arg& x) { return unpack_symint(x, what); });
}

std::optional<SymIntList> unpack_opt_symint_list(const Arg& a, const char* what, int size) {
  if (is_none(a)) return std::nullopt;
  return unpack_symint_list(a, what, size);
}

std::vector<double> unpack_float_list(const Arg& a, const char* what, int size) {
  return unpack_list<double>(a, what, size, [&](const Arg& x) { return unpack_float(x, what); });
}

std::optional<std::vector<double>> unpack_opt_float_list(const Arg& a, const char* what, int size) {
  if (is_none(a)) return std::nullopt;
  return unpack_float_list(a, what, size);
}

std::vector<bool> unpack_bool_list(const Arg& a, const char* what, int size) {
  return unpack_list<bool>(a, what, size, [&](const Arg& x) { return unpack_bool(x, what); });
}

}  // namespace fastonnx
