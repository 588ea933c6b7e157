#include "fastonnx/passes.h"

#include <vector>

namespace fastonnx {

void remove_dead_nodes(Graph& g) {
  std::vector<bool> live(g.num_values(), false);
  for (uint32_t out : g.graph_outputs()) live[out] = true;
  // Nodes are in topological order, so one backward sweep settles liveness.
  for (NodeId n = static_cast<NodeId>(g.num_nodes()); n-- > 0;) {
    bool needed = false;
    for (uint32_t out : g.outputs(n)) needed = needed || live[out];
    if (!needed) {
      g.kill(n);
      continue;
    }
    for (uint32_t in : g.inputs(n)) {
      if (in != Value::kNone) live[in] = true;
    }
  }
}

}  // namespace fastonnx
