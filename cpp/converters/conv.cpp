// convolution: the generic overload behind conv*/conv_transpose*, any spatial rank.
#include "common.h"
#include "fastonnx/helpers.h"

namespace fastonnx::manual {

Value convolution(Builder& b, Value input, Value weight, std::optional<Value> bias, SymIntList stride,
                  SymIntList padding, SymIntList dilation, bool transposed, SymIntList output_padding,
                  SymInt groups) {
  Attrs attrs = {Attr::ints("strides", b.static_ints(stride)), Attr::ints("dilations", b.static_ints(dilation)),
                 Attr::i("group", b.static_int(groups))};
  if (transposed) {
    attrs.push_back(Attr::ints("pads", helper_transpose_pads(b, padding, output_padding)));
    attrs.push_back(Attr::ints("output_padding", helper_transpose_output_padding(b, padding, output_padding)));
  } else {
    attrs.push_back(Attr::ints("pads", helper_twice(b, padding)));
  }
  const char* op = transposed ? "ConvTranspose" : "Conv";
  return with_batch(b, input, b.rank(weight), [&](Value x) { return b.op(op, {x, weight, bias}, attrs); });
}

}  // namespace fastonnx::manual
