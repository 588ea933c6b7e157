// Must compile: the control of the other files here (the same includes and flags, valid ops).
#include "fastonnx/builder.h"

fastonnx::Value valid(fastonnx::Builder& b, fastonnx::Value x, bool relu) {
  const fastonnx::Value clipped = b.op<"Clip">({x, std::optional<fastonnx::Value>{}, x});
  return b.op(relu ? fastonnx::OpType("Relu") : fastonnx::OpType("Sigmoid"), {b.op<"Add">({clipped, x})});
}
