#include "fastonnx/helpers.h"

namespace fastonnx {

std::vector<int64_t> helper_twice(Builder& b, const SymIntList& padding) {
  return helper_twice(b, b.static_ints(padding));
}

std::vector<int64_t> helper_twice(Builder&, const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads(padding);
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

std::string helper_auto_pad(Builder& b, const std::string& padding) {
  if (padding == "same") return "SAME_UPPER";
  if (padding == "valid") return "VALID";
  b.fail("padding must be \"same\" or \"valid\", got \"" + padding + "\"");
}

}  // namespace fastonnx
