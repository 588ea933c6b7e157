// Must not compile: an op chosen at run time names only ONNX ops ("Sigmod" is none).
#include "fastonnx/builder.h"

fastonnx::Value chosen(fastonnx::Builder& b, fastonnx::Value x, bool relu) {
  return b.op(relu ? fastonnx::OpType("Relu") : fastonnx::OpType("Sigmod"), {x});
}
