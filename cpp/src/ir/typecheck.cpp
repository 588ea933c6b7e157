#include "fastonnx/typecheck.h"

#include <algorithm>
#include <iterator>
#include <vector>

namespace fastonnx {

std::string input_types_error(std::string_view type, int opset, const OpTypes& spec,
                              std::span<const ScalarType> inputs) {
  if (spec.inputs.empty()) return "";
  constexpr size_t kGroups = 16;
  ScalarType group_type[kGroups];
  size_t group_input[kGroups] = {};
  std::fill(std::begin(group_type), std::end(group_type), ScalarType::Undefined);
  const size_t n_formal = spec.inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ScalarType t = inputs[i];
    if (t == ScalarType::Undefined) continue;
    const FormalInput& formal = spec.inputs[std::min(i, n_formal - 1)];
    if (i >= n_formal && !formal.variadic) break;  // more inputs than ONNX has: the checker says so
    if ((formal.allowed & (uint64_t{1} << static_cast<int>(t))) == 0) {
      std::string allowed;
      for (int code = 0; code < 64; ++code) {
        if (formal.allowed & (uint64_t{1} << code)) {
          allowed += std::string(allowed.empty() ? "" : ", ") + dtype_name(static_cast<ScalarType>(code));
        }
      }
      return "ONNX " + std::string(type) + " (opset " + std::to_string(opset) + ") has no " + dtype_name(t) +
             " version (input " + std::to_string(i) + " takes " + allowed + ")";
    }
    if (formal.group < kGroups) {
      ScalarType& seen = group_type[formal.group];
      if (seen == ScalarType::Undefined) {
        seen = t;
        group_input[formal.group] = i;
      } else if (seen != t) {
        return "ONNX " + std::string(type) + " needs inputs " + std::to_string(group_input[formal.group]) + " and " +
               std::to_string(i) + " of one element type, got " + dtype_name(seen) + " and " + dtype_name(t);
      }
    }
  }
  return "";
}

ScalarType output_type(const OpTypes& spec, size_t i, std::span<const ScalarType> inputs, std::span<const Attr> attrs) {
  if (spec.outputs.empty()) return ScalarType::Undefined;
  // A variadic last output (Split) shares the type of the last formal one.
  const OutputType& rule = spec.outputs[std::min(i, spec.outputs.size() - 1)];
  if (!rule.attr.empty()) {
    if (const Attr* a = find_attr(attrs, rule.attr, Attr::Kind::Int))
      return scalar_type_from_onnx(static_cast<int>(a->as_int()));
  }
  if (rule.input >= 0 && static_cast<size_t>(rule.input) < inputs.size() &&
      inputs[static_cast<size_t>(rule.input)] != ScalarType::Undefined) {
    // Loop's and Scan's carried values each have a type of their own, which no rule says.
    if (!spec.inputs.empty() &&
        spec.inputs[std::min(static_cast<size_t>(rule.input), spec.inputs.size() - 1)].group == kOwnTypes) {
      return ScalarType::Undefined;
    }
    return inputs[static_cast<size_t>(rule.input)];
  }
  return rule.fixed;
}

namespace {

// The element type a value is written with: a complex value as its real parts (serializer.cpp).
ScalarType written(const Graph& g, Value v) {
  if (!v.valid()) return ScalarType::Undefined;
  const ScalarType t = g.info(v).dtype;
  return is_complex(t) ? real_part_type(t) : t;
}

[[noreturn]] void mismatch(const Graph& g, NodeId n, const std::string& what, ScalarType declared, ScalarType actual) {
  throw ConvertError(node_label(g, n) + ": " + what + " is " + dtype_name(actual) + " where the graph declares " +
                     dtype_name(declared) + " (a fastonnx bug: the file would not load in onnxruntime)");
}

// An If, Loop or Scan node declares the types its subgraphs return (a Loop body's first output is
// its condition, which the node does not return).
void check_subgraph_outputs(const Graph& g, NodeId n, std::string_view type) {
  const size_t skipped = type == "Loop" ? 1 : 0;
  const auto outs = g.outputs(n);
  for (const Attr& a : g.attrs(n)) {
    if (a.kind() != Attr::Kind::Graph) continue;
    const Subgraph& sub = g.subgraph(a.as_graph());
    for (size_t j = 0; j < outs.size() && j + skipped < sub.outputs.size(); ++j) {
      const ScalarType declared = written(g, outs[j]), returned = written(g, sub.outputs[j + skipped]);
      if (declared != ScalarType::Undefined && returned != ScalarType::Undefined && declared != returned) {
        mismatch(g, n, "output " + std::to_string(j) + " of its `" + std::string(a.name.str()) + "` subgraph", declared,
                 returned);
      }
    }
  }
}

}  // namespace

void check_types(const Graph& g, int opset) {
  std::vector<ScalarType> inputs;
  for (const NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.dead || node.domain != kNoName) continue;  // other domains' types are their own
    const std::string_view type = g.strings.str(node.op_type);
    const OpTypes* spec = onnx_types(type, opset);
    if (spec == nullptr) continue;
    inputs.clear();
    for (const Value v : g.inputs(n)) inputs.push_back(written(g, v));
    if (const std::string error = input_types_error(type, opset, *spec, inputs); !error.empty()) {
      throw ConvertError(node_label(g, n) + ": " + error + " (a fastonnx bug: the file would not load in onnxruntime)");
    }
    const auto outs = g.outputs(n);
    for (size_t i = 0; i < outs.size(); ++i) {
      const ScalarType declared = written(g, outs[i]), inferred = output_type(*spec, i, inputs, g.attrs(n));
      if (declared != ScalarType::Undefined && inferred != ScalarType::Undefined && declared != inferred) {
        mismatch(g, n, "output " + std::to_string(i) + " as ONNX infers it", declared, inferred);
      }
    }
    check_subgraph_outputs(g, n, type);
  }
}

}  // namespace fastonnx
