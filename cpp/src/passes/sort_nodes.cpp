#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fastonnx/passes.h"

namespace fastonnx {

namespace {

// What node `n` needs placed before it: the producers of the values it reads, and the nodes of
// the subgraphs it owns (which must precede their owner, ir.h's Subgraph).
void needed_before(const Graph& g, NodeId n, const std::vector<std::vector<NodeId>>& nodes_of,
                   std::vector<NodeId>& out) {
  out.clear();
  for (const Value in : g.inputs(n)) {
    if (!in.valid()) continue;
    const NodeId p = g.info(in).producer;
    if (p != kNoNode) out.push_back(p);
  }
  for (const Attr& a : g.attrs(n)) {
    if (a.kind() != Attr::Kind::Graph) continue;
    const auto& inner = nodes_of[a.as_graph().index];
    out.insert(out.end(), inner.begin(), inner.end());
  }
}

}  // namespace

void sort_nodes(Graph& g) {
  const size_t count = g.num_nodes();
  std::vector<std::vector<NodeId>> nodes_of(g.num_subgraphs() + 1);
  for (const NodeId n : g.node_ids()) {
    if (!g.node(n).dead) nodes_of[g.node(n).graph.index].push_back(n);
  }
  // Depth-first, post-order, in arena order: a node already after what it reads is emitted where
  // it is. Iterative, as a graph of 100k nodes would overflow the stack.
  enum : uint8_t { kUnseen, kOpen, kDone };
  std::vector<uint8_t> state(count, kUnseen);
  std::vector<NodeId> order;
  order.reserve(count);
  struct Frame {
    NodeId node;
    std::vector<NodeId> before;
    size_t next = 0;
  };
  std::vector<Frame> stack;
  for (const NodeId root : g.node_ids()) {
    if (g.node(root).dead || state[root.index] != kUnseen) continue;
    stack.push_back({root, {}, 0});
    state[root.index] = kOpen;
    needed_before(g, root, nodes_of, stack.back().before);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.before.size()) {
        const NodeId dep = top.before[top.next++];
        if (g.node(dep).dead) throw std::logic_error("sort_nodes: a live node reads a value of a dead node");
        if (state[dep.index] == kOpen) throw std::logic_error("sort_nodes: the graph has a cycle");
        if (state[dep.index] == kDone) continue;
        state[dep.index] = kOpen;
        Frame frame{dep, {}, 0};
        needed_before(g, dep, nodes_of, frame.before);
        stack.push_back(std::move(frame));
        continue;
      }
      state[top.node.index] = kDone;
      order.push_back(top.node);
      stack.pop_back();
    }
  }
  for (const NodeId n : g.node_ids()) {
    if (g.node(n).dead) order.push_back(n);
  }
  g.permute_nodes(order);
}

}  // namespace fastonnx
