// The arguments of one FX node as they arrive from Python: a small tagged tree. The generated
// registry unpacks them into each converter's typed signature (unpack.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fastonnx {

struct Arg {
  // Missing: the caller left the argument out, so the schema default applies.
  enum class Kind : uint8_t { Missing, None, Bool, Int, Float, Str, Value, List };
  Kind kind = Kind::Missing;
  int64_t i = 0;  // Bool, Int, and the value id of Value
  double f = 0;
  std::string s;
  std::vector<Arg> items;

  static Arg value(uint32_t id) {
    Arg a;
    a.kind = Kind::Value;
    a.i = id;
    return a;
  }
  const char* kind_name() const;
};

using Args = std::vector<Arg>;

}  // namespace fastonnx
