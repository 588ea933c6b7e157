#include "fastonnx/helpers.h"

#include <algorithm>
#include <string>

namespace fastonnx {

std::vector<int64_t> helper_twice(Builder& b, const SymIntList& padding) {
  return helper_twice(b, b.static_ints(padding));
}

std::vector<int64_t> helper_twice(Builder&, const std::vector<int64_t>& padding) {
  std::vector<int64_t> pads(padding);
  pads.insert(pads.end(), padding.begin(), padding.end());
  return pads;
}

namespace {
void check_same_length(Builder& b, const std::vector<int64_t>& pad, const std::vector<int64_t>& extra) {
  if (pad.size() != extra.size()) {
    b.fail("output_padding has " + std::to_string(extra.size()) + " values for " + std::to_string(pad.size()) +
           " padding values");
  }
}
}  // namespace

std::vector<int64_t> helper_transpose_pads(Builder& b, const SymIntList& padding, const SymIntList& output_padding) {
  const std::vector<int64_t> pad = b.static_ints(padding), extra = b.static_ints(output_padding);
  check_same_length(b, pad, extra);
  std::vector<int64_t> pads(pad);
  for (size_t i = 0; i < pad.size(); ++i) pads.push_back(std::max<int64_t>(pad[i] - extra[i], 0));
  return pads;
}

std::vector<int64_t> helper_transpose_output_padding(Builder& b, const SymIntList& padding,
                                                     const SymIntList& output_padding) {
  const std::vector<int64_t> pad = b.static_ints(padding), extra = b.static_ints(output_padding);
  check_same_length(b, pad, extra);
  std::vector<int64_t> out;
  for (size_t i = 0; i < pad.size(); ++i) out.push_back(std::max<int64_t>(extra[i] - pad[i], 0));
  return out;
}

std::vector<int64_t> helper_conv_pads(Builder& b, const std::string& padding, Value weight,
                                      const SymIntList& dilation) {
  const auto kernel = b.static_shape(weight);
  if (!kernel || kernel->size() < 3) {
    b.fail("padding=\"" + padding + "\" needs a weight of static shape and rank 3 or more");
  }
  const size_t spatial = kernel->size() - 2;
  std::vector<int64_t> pads(2 * spatial, 0);
  if (padding == "valid") return pads;
  if (padding != "same") b.fail("padding must be \"same\" or \"valid\", got \"" + padding + "\"");
  const std::vector<int64_t> d = b.static_ints(dilation);
  if (d.size() != 1 && d.size() != spatial) {
    b.fail("dilation has " + std::to_string(d.size()) + " values for a " + std::to_string(spatial) + "-d convolution");
  }
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t total = d[d.size() == 1 ? 0 : i] * ((*kernel)[i + 2] - 1);
    pads[i] = total / 2;
    pads[i + spatial] = total - total / 2;
  }
  return pads;
}

}  // namespace fastonnx
