// Small graphs for the tests: a Graph with a Builder at one opset, and readers of its nodes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/builder.h"
#include "fastonnx/ir.h"

namespace fastonnx::testing {

constexpr int kOpset = 18;

struct TestGraph {
  Graph g;
  Builder b{g, kOpset};

  Value input(std::string_view name, std::vector<int64_t> shape, ScalarType dtype = ScalarType::Float) {
    std::vector<Dim> dims;
    for (int64_t d : shape) dims.push_back(Dim{d, kNoName});
    return g.add_input(name, dtype, dims);
  }
  // The node that produces `v`.
  const Node& producer(Value v) const { return g.node(g.info(v).producer); }
  std::string_view op(NodeId n) const { return g.strings.str(g.node(n).op_type); }
  // The op types of the live nodes, in order.
  std::vector<std::string> live_ops() const {
    std::vector<std::string> out;
    for (const NodeId n : g.node_ids()) {
      if (!g.node(n).dead) out.emplace_back(op(n));
    }
    return out;
  }
};

}  // namespace fastonnx::testing
