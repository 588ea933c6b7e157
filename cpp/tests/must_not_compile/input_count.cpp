// Must not compile: Add takes two inputs at every supported opset.
#include "fastonnx/builder.h"

fastonnx::Value one_input(fastonnx::Builder& b, fastonnx::Value x) { return b.op<"Add">({x}); }
