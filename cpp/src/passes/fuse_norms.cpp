#include "fastonnx/onnxruntime_passes.h"

namespace fastonnx {

void fuse_norms(Graph& /*g*/, RewriteReport& /*report*/) {}

}  // namespace fastonnx
