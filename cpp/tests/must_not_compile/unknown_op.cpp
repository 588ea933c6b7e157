// Must not compile: ONNX has no op "Clpi" (onnx_op.h, checked against cpp/generated/onnx_ops.h).
#include "fastonnx/builder.h"

fastonnx::Value misspelled(fastonnx::Builder& b, fastonnx::Value x) { return b.op<"Clpi">({x}); }
