// MatMulNBits nodes that read the same activations (a layer's Q, K and V projections; an MLP's
// gate and up) become one MatMulNBits over their weights stacked along N, then a Split: one
// kernel call instead of several, which is most of their cost when decoding a token. The
// stacked weights and scales are the quantized ones, concatenated while written (stacked_bytes).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "fastonnx/onnxruntime_passes.h"

namespace fastonnx {

namespace {

struct Member {
  NodeId node;
  int64_t n;
};

// What must agree for nodes to share one MatMulNBits: the activations, K, and the quantization.
using GroupKey = std::tuple<uint32_t, int64_t, int64_t, int64_t, int64_t, bool>;

const TensorBytes* computed(const Graph& g, Value v) {
  const Initializer* init = v.valid() ? g.initializer(v) : nullptr;
  return init != nullptr ? init->computed.get() : nullptr;
}

// The bias inputs' bytes one after the other, in a new initializer (biases are small, [N]).
Value stacked_bias(Graph& g, const std::vector<Member>& members, int64_t total) {
  const ScalarType dtype = g.info(g.inputs(members.front().node)[5]).dtype;
  auto bytes = std::make_shared<std::vector<uint8_t>>();
  for (const Member& m : members) {
    const Initializer* init = g.initializer(g.inputs(m.node)[5]);
    const auto* p = static_cast<const uint8_t*>(init->data);
    bytes->insert(bytes->end(), p, p + init->nbytes);
  }
  const Dim dims[] = {{total, kNoName}};
  const void* data = bytes->data();
  const size_t nbytes = bytes->size();
  return g.add_initializer("", dtype, dims, data, nbytes, std::move(bytes));
}

void pack(Graph& g, const std::vector<Member>& members, RewriteReport& report) {
  const NodeId first = members.front().node;
  const auto in = g.inputs(first);
  const Value a = in[0];
  const ScalarType scale_dtype = g.info(in[2]).dtype;
  int64_t total = 0;
  std::vector<std::shared_ptr<const TensorBytes>> values, scales;
  std::vector<int64_t> sizes;
  for (const Member& m : members) {
    const auto ins = g.inputs(m.node);
    values.push_back(g.initializer(ins[1])->computed);
    scales.push_back(g.initializer(ins[2])->computed);
    sizes.push_back(m.n);
    total += m.n;
  }
  const auto q_shape = g.shape(in[1]);
  const Dim value_dims[] = {{total, kNoName}, q_shape[1], q_shape[2]};
  const Dim scale_dims[] = {{total, kNoName}, q_shape[1]};
  const Value stacked_scales =
      g.add_computed_initializer(scale_dtype, scale_dims, stacked_bytes(std::move(scales), element_size(scale_dtype)));
  const Value stacked_values =
      g.add_computed_initializer(ScalarType::Byte, value_dims, stacked_bytes(std::move(values), 1));
  const std::string name(g.name(in[1]));
  const std::string base = name.substr(0, name.rfind('_'));
  const std::string suffix = name.substr(name.rfind('_'));
  g.set_name(stacked_values, base + "_packed" + std::to_string(members.size()) + suffix);
  g.set_name(stacked_scales, base + "_packed" + std::to_string(members.size()) + "_scales");
  const Value bias = in.size() > 5 ? stacked_bias(g, members, total) : Value{};

  Attrs attrs;
  for (const Attr& at : g.attrs(first)) attrs.push_back(at.name == AttrName("N") ? Attr::i("N", total) : at);
  const Value packed = g.add_value(g.info(a).dtype);
  const Value mm_inputs[] = {a, stacked_values, stacked_scales, Value{}, Value{}, bias};
  const Value mm_outputs[] = {packed};
  std::vector<Value> outputs;
  for (const Member& m : members) {
    outputs.push_back(g.outputs(m.node)[0]);
    g.kill(m.node);
  }
  g.add_fused("MatMulNBits", kMicrosoftDomain, mm_inputs, mm_outputs, attrs);
  auto split_bytes = std::make_shared<std::vector<int64_t>>(sizes);
  const Dim split_dims[] = {{static_cast<int64_t>(sizes.size()), kNoName}};
  const void* data = split_bytes->data();
  const Value split =
      g.add_initializer("", ScalarType::Long, split_dims, data, sizes.size() * sizeof(int64_t), std::move(split_bytes));
  const Value split_inputs[] = {packed, split};
  g.add_fused("Split", "", split_inputs, outputs, {Attr::i("axis", -1)});
  report.count("MatMulNBits packed", members.size());
}

}  // namespace

void pack_quantized_matmuls(Graph& g, RewriteReport& report) {
  std::vector<std::pair<GroupKey, std::vector<Member>>> groups;
  for (const NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.dead || node.graph != kMainGraph || g.strings.str(node.domain) != kMicrosoftDomain ||
        op_of(g, n) != "MatMulNBits") {
      continue;
    }
    const auto in = g.inputs(n);
    const bool has_bias = in.size() == 6;
    // Only what quantize_weights writes: computed values and scales, no zero points, a bias in memory.
    if (in.size() != 3 && !(has_bias && !in[3].valid() && !in[4].valid())) continue;
    if (computed(g, in[1]) == nullptr || computed(g, in[2]) == nullptr) continue;
    if (has_bias && (!g.is_initializer(in[5]) || g.initializer(in[5])->data == nullptr)) continue;
    const GroupKey key{in[0].id,
                       attr_int(g.attrs(n), "K", 0),
                       attr_int(g.attrs(n), "bits", 4),
                       attr_int(g.attrs(n), "block_size", 0),
                       attr_int(g.attrs(n), "accuracy_level", 0),
                       has_bias};
    const Member member{n, attr_int(g.attrs(n), "N", 0)};
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) { return grp.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {member}});
    } else {
      it->second.push_back(member);
    }
  }
  for (const auto& [key, members] : groups) {
    if (members.size() > 1) pack(g, members, report);
  }
}

}  // namespace fastonnx
