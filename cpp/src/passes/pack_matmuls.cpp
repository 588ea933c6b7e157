// MatMuls that read the same activations (a layer's Q, K and V projections; an MLP's gate and
// up) become one MatMul over their weights side by side along N, then a Split: one kernel call
// instead of several, which is most of their cost when decoding a token. MatMulNBits' stacked
// weights and scales are the quantized ones, concatenated while written (stacked_bytes); a float
// MatMul's are its weights' columns, interleaved row by row while written (columns_bytes).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "fastonnx/onnxruntime_passes.h"

namespace fastonnx {

namespace {

struct Member {
  NodeId node;
  int64_t n;
};

// What must agree for nodes to share one MatMul: the activations, K, and the quantization (bits
// 0 for a float MatMul).
using GroupKey = std::tuple<uint32_t, int64_t, int64_t, int64_t, int64_t, bool>;

// Adds `member` to the group of `key`, in the order groups are first seen.
void group(std::vector<std::pair<GroupKey, std::vector<Member>>>& groups, const GroupKey& key, Member member) {
  auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& grp) { return grp.first == key; });
  if (it == groups.end()) {
    groups.push_back({key, {member}});
  } else {
    it->second.push_back(member);
  }
}

// The packed output split back into the members' outputs, along its last axis.
void split_outputs(Graph& g, Value packed, const std::vector<Member>& members) {
  std::vector<Value> outputs;
  std::vector<int64_t> sizes;
  for (const Member& m : members) {
    outputs.push_back(g.outputs(m.node)[0]);
    sizes.push_back(m.n);
    g.kill(m.node);
  }
  auto split_bytes = std::make_shared<std::vector<int64_t>>(sizes);
  const Dim split_dims[] = {{static_cast<int64_t>(sizes.size()), kNoName}};
  const void* data = split_bytes->data();
  const Value split =
      g.add_initializer("", ScalarType::Long, split_dims, data, sizes.size() * sizeof(int64_t), std::move(split_bytes));
  const Value split_inputs[] = {packed, split};
  g.add_fused("Split", "", split_inputs, outputs, {Attr::i("axis", -1)});
}

// The first member's weight name with `_packed<count>` before its last `_` part (`_Q4`, `_transpose`).
std::string packed_name(const Graph& g, Value first_weight, size_t count, std::string_view suffix = {}) {
  const std::string name(g.name(first_weight));
  const size_t cut = name.rfind('_') == std::string::npos ? name.size() : name.rfind('_');
  return name.substr(0, cut) + "_packed" + std::to_string(count) +
         (suffix.empty() ? name.substr(cut) : std::string(suffix));
}

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
  g.set_name(stacked_values, packed_name(g, in[1], members.size()));
  g.set_name(stacked_scales, packed_name(g, in[1], members.size(), "_scales"));
  const Value bias = in.size() > 5 ? stacked_bias(g, members, total) : Value{};

  Attrs attrs;
  for (const Attr& at : g.attrs(first)) attrs.push_back(at.name == AttrName("N") ? Attr::i("N", total) : at);
  const Value packed = g.add_value(g.info(a).dtype);
  const Value mm_inputs[] = {a, stacked_values, stacked_scales, Value{}, Value{}, bias};
  const Value mm_outputs[] = {packed};
  g.add_fused("MatMulNBits", kMicrosoftDomain, mm_inputs, mm_outputs, attrs);
  split_outputs(g, packed, members);
  report.count("MatMulNBits packed", members.size());
}

// The weight's bytes as the writer computes them, or those the model holds.
std::shared_ptr<const TensorBytes> weight_bytes(const Graph& g, Value w) {
  const Initializer* init = g.initializer(w);
  if (init->computed) return init->computed;
  return memory_bytes(init->data, init->owner, init->nbytes, element_size(g.info(w).dtype));
}

void pack_float(Graph& g, const std::vector<Member>& members, RewriteReport& report) {
  const auto in = g.inputs(members.front().node);
  const int64_t k = g.shape(in[1])[0].value;
  std::vector<std::shared_ptr<const TensorBytes>> parts;
  int64_t total = 0;
  for (const Member& m : members) {
    parts.push_back(weight_bytes(g, g.inputs(m.node)[1]));
    total += m.n;
  }
  const Dim dims[] = {{k, kNoName}, {total, kNoName}};
  const Value weights = g.add_computed_initializer(g.info(in[1]).dtype, dims, columns_bytes(std::move(parts), k));
  g.set_model_tensor(weights);
  g.set_name(weights, packed_name(g, in[1], members.size()));
  const Value packed = g.add_value(g.info(in[0]).dtype);
  const Value mm_inputs[] = {in[0], weights};
  const Value mm_outputs[] = {packed};
  g.add_fused("MatMul", "", mm_inputs, mm_outputs, {});
  split_outputs(g, packed, members);
  report.count("MatMul packed", members.size());
}

// The memory an initializer's bytes are read from (a computed one's borrowed source).
const void* source_of(const Initializer& init) {
  return init.computed ? static_cast<const void*>(init.computed->source().data()) : init.data;
}

// How many live initializers read each model memory: a weight used twice is two initializers
// (a Linear applied twice: two folded Transposes of one parameter) whose bytes the writer writes
// once, and packing one of them would write them again.
std::unordered_map<const void*, int> sources_read(const Graph& g, const Readers& readers) {
  std::unordered_map<const void*, int> count;
  for (const Initializer& init : g.initializers()) {
    if (readers.count(init.value) > 0 && source_of(init) != nullptr) ++count[source_of(init)];
  }
  return count;
}

// A float MatMul's weight that can join a packed one: a constant [K, N] matrix only it reads,
// from memory nothing else reads, whose bytes the writer may recompute (not a runtime-overridable
// input, nor a weight the file points at in its checkpoint).
bool packable_weight(const Graph& g, const Readers& readers, const std::unordered_map<const void*, int>& sources,
                     NodeId n, Value w) {
  if (!w.valid() || !g.is_initializer(w) || !readers.only(w, n)) return false;
  const Initializer* init = g.initializer(w);
  if (init->overridable || init->pinned || source_of(*init) == nullptr || sources.at(source_of(*init)) != 1) {
    return false;
  }
  const auto shape = g.static_shape(w);
  return shape && shape->size() == 2 && g.info(w).dtype == g.info(g.inputs(n)[0]).dtype;
}

}  // namespace

void pack_matmuls(Graph& g, RewriteReport& report) {
  const Readers readers(g);
  const auto sources = sources_read(g, readers);
  std::vector<std::pair<GroupKey, std::vector<Member>>> groups;
  for (const NodeId n : g.node_ids()) {
    const Node& node = g.node(n);
    if (node.dead || node.graph != kMainGraph) continue;
    if (node.domain == kNoName && op_of(g, n) == "MatMul") {
      const auto in = g.inputs(n);
      if (!packable_weight(g, readers, sources, n, in[1])) continue;
      const auto shape = *g.static_shape(in[1]);
      group(groups, {in[0].id, shape[0], 0, 0, 0, false}, {n, shape[1]});
      continue;
    }
    if (g.strings.str(node.domain) != kMicrosoftDomain || op_of(g, n) != "MatMulNBits") continue;
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
    group(groups, key, {n, attr_int(g.attrs(n), "N", 0)});
  }
  for (const auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    if (std::get<2>(key) == 0) {
      pack_float(g, members, report);
    } else {
      pack(g, members, report);
    }
  }
}

}  // namespace fastonnx
