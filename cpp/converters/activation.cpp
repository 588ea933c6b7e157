// Activations whose ONNX form depends on shapes, opsets or a mode flag.
#include <string>

#include "common.h"
#include "converters_activation.h"

namespace fastonnx::manual {

// torch's prelu reshapes a weight of another rank to broadcast over dim 1 (the channels) before
// the elementwise kernel; ONNX's PRelu broadcasts the slope the same way once it is so shaped.
Value prelu(Builder& b, Value self, Value weight) {
  const int64_t rank = b.rank(self);
  if (b.rank(weight) != rank) {
    std::vector<int64_t> broadcast_shape(static_cast<size_t>(rank), 1);
    if (rank >= 2) broadcast_shape[1] = -1;
    weight = b.op<"Reshape">({weight, b.ints(broadcast_shape)});
  }
  return b.op<"PRelu">({self, weight});
}

// The first half along `dim` times the sigmoid of the second half.
Value glu(Builder& b, Value self, int64_t dim) {
  // Split halves equal parts by its number of outputs; from opset 18 it must be told so.
  Attrs attrs = {Attr::i("axis", dim)};
  if (b.opset() >= 18) attrs.push_back(Attr::i("num_outputs", 2));
  const std::vector<Value> halves = b.op_n<"Split">({self}, attrs, 2);
  return b.op<"Mul">({halves[0], b.op<"Sigmoid">({halves[1]})});
}

// In eval mode rrelu is leaky_relu with the mean of its slope range.
Value rrelu(Builder& b, Value self, Scalar lower, Scalar upper, bool training) {
  if (training) {
    b.fail(
        "rrelu in training mode draws a random slope per element, which an exported model cannot "
        "reproduce; export the model in eval mode (model.eval(), or F.rrelu(..., training=False))");
  }
  return b.op<"LeakyRelu">({self}, {Attr::f("alpha", (lower.to_double() + upper.to_double()) / 2)});
}

}  // namespace fastonnx::manual
