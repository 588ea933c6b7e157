#include "fastonnx/serializer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/prefetch.h"
#include "fastonnx/read_pages.h"
#include "opsets.h"

namespace fastonnx {
namespace {

// Field numbers from onnx/onnx.proto.
namespace model_f {
enum : uint32_t {
  ir_version = 1,
  producer_name = 2,
  producer_version = 3,
  graph = 7,
  opset_import = 8,
  functions = 25
};
}
namespace function_f {
enum : uint32_t { name = 1, input = 4, output = 5, node = 7, opset_import = 9, domain = 10 };
}
namespace graph_f {
enum : uint32_t { node = 1, name = 2, initializer = 5, input = 11, output = 12, value_info = 13 };
}
namespace node_f {
enum : uint32_t { input = 1, output = 2, name = 3, op_type = 4, attribute = 5, domain = 7 };
}
namespace attr_f {
enum : uint32_t { name = 1, f = 2, i = 3, s = 4, t = 5, g = 6, floats = 7, ints = 8, strings = 9, tp = 14, type = 20 };
}
namespace attr_type {
enum : uint32_t {
  FLOAT = 1,
  INT = 2,
  STRING = 3,
  TENSOR = 4,
  GRAPH = 5,
  FLOATS = 6,
  INTS = 7,
  STRINGS = 8,
  TYPE_PROTO = 13
};
}
namespace tensor_f {
enum : uint32_t { dims = 1, data_type = 2, name = 8, raw_data = 9, external_data = 13, data_location = 14 };
}
namespace entry_f {
enum : uint32_t { key = 1, value = 2 };
}
constexpr uint64_t kDataLocationExternal = 1;
// A tensor of at least kPageAlignedBytes starts on a page boundary (memory-mappable on its own);
// smaller ones on a 64-byte boundary, so padding stays small.
constexpr size_t kPageAlignedBytes = size_t{64} << 10;
constexpr size_t kPage = 4096;
constexpr size_t kSmallAlignment = 64;
namespace vi_f {
enum : uint32_t { name = 1, type = 2 };
}
namespace type_f {
enum : uint32_t { tensor_type = 1, sequence_type = 4, optional_type = 9 };
}
namespace optional_f {
enum : uint32_t { elem_type = 1 };
}
namespace sequence_f {
enum : uint32_t { elem_type = 1 };
}
namespace ttype_f {
enum : uint32_t { elem_type = 1, shape = 2 };
}
namespace shape_f {
enum : uint32_t { dim = 1 };
}
namespace dim_f {
enum : uint32_t { dim_value = 1, dim_param = 2 };
}
namespace opset_f {
enum : uint32_t { domain = 1, version = 2 };
}

// A complex value is a real tensor with a trailing dimension of 2 (real, imaginary): ONNX's DFT
// layout; onnxruntime runs no op on complex tensors.
int stored_dtype(ScalarType t) { return onnx_dtype(real_part_type(t)); }

// `subgraph` writes the GraphProto of a Graph attribute.
ProtoMessage attribute(const Attr& a, const std::function<ProtoMessage(const Attr&)>& subgraph) {
  ProtoMessage m;
  m.bytes_field(attr_f::name, a.name.str());
  switch (a.kind()) {
    case Attr::Kind::Graph:
      m.message_field(attr_f::g, subgraph(a));
      m.varint_field(attr_f::type, attr_type::GRAPH);
      break;
    case Attr::Kind::Int:
      m.int64_field(attr_f::i, a.as_int());
      m.varint_field(attr_f::type, attr_type::INT);
      break;
    case Attr::Kind::Float:
      m.float_field(attr_f::f, static_cast<float>(a.as_float()));
      m.varint_field(attr_f::type, attr_type::FLOAT);
      break;
    case Attr::Kind::String:
      m.bytes_field(attr_f::s, a.as_string());
      m.varint_field(attr_f::type, attr_type::STRING);
      break;
    case Attr::Kind::Ints:
      m.packed_int64_field(attr_f::ints, a.as_ints());
      m.varint_field(attr_f::type, attr_type::INTS);
      break;
    case Attr::Kind::Floats:
      m.packed_float_field(attr_f::floats, std::vector<float>(a.as_floats().begin(), a.as_floats().end()));
      m.varint_field(attr_f::type, attr_type::FLOATS);
      break;
    case Attr::Kind::Strings:
      for (const std::string& v : a.as_strings()) m.bytes_field(attr_f::strings, v);
      m.varint_field(attr_f::type, attr_type::STRINGS);
      break;
    case Attr::Kind::TensorType: {
      ProtoMessage tensor_type;
      tensor_type.varint_field(ttype_f::elem_type, static_cast<uint64_t>(stored_dtype(a.as_tensor_type())));
      ProtoMessage type;
      type.message_field(type_f::tensor_type, tensor_type);
      m.message_field(attr_f::tp, type);
      m.varint_field(attr_f::type, attr_type::TYPE_PROTO);
      break;
    }
  }
  return m;
}

ProtoMessage value_info(const Graph& g, Value v) {
  const ValueInfo& info = g.info(v);
  ProtoMessage tensor_type;
  tensor_type.varint_field(ttype_f::elem_type, static_cast<uint64_t>(stored_dtype(info.dtype)));
  if (info.has_shape) {
    ProtoMessage shape;
    for (const Dim& d : g.shape(v)) {
      ProtoMessage dim;
      if (d.symbol != kNoName) {
        dim.bytes_field(dim_f::dim_param, g.strings.str(d.symbol));
      } else if (d.value >= 0) {
        dim.int64_field(dim_f::dim_value, d.value);
      }
      shape.message_field(shape_f::dim, dim);
    }
    if (is_complex(info.dtype)) {
      ProtoMessage pair;
      pair.int64_field(dim_f::dim_value, 2);
      shape.message_field(shape_f::dim, pair);
    }
    tensor_type.message_field(ttype_f::shape, shape);
  }
  ProtoMessage type;
  if (info.sequence) {  // sequence_type { elem_type: the tensor type, of items whose shapes may differ }
    ProtoMessage item_type;
    item_type.varint_field(ttype_f::elem_type, static_cast<uint64_t>(stored_dtype(info.dtype)));
    ProtoMessage item;
    item.message_field(type_f::tensor_type, item_type);
    ProtoMessage sequence;
    sequence.message_field(sequence_f::elem_type, item);
    type.message_field(type_f::sequence_type, sequence);
  } else {
    type.message_field(type_f::tensor_type, tensor_type);
  }
  if (info.optional) {  // optional_type { elem_type: the tensor type }
    ProtoMessage optional;
    optional.message_field(optional_f::elem_type, type);
    type = ProtoMessage();
    type.message_field(type_f::optional_type, optional);
  }
  ProtoMessage m;
  m.bytes_field(vi_f::name, g.name(v));
  m.message_field(vi_f::type, type);
  return m;
}

void external_entry(ProtoMessage& m, std::string_view key, std::string_view value) {
  ProtoMessage entry;
  entry.bytes_field(entry_f::key, key);
  entry.bytes_field(entry_f::value, value);
  m.message_field(tensor_f::external_data, entry);
}

ProtoMessage tensor(const Graph& g, const Initializer& init, ExternalData* external) {
  ProtoMessage m;
  std::vector<int64_t> dims;
  for (const Dim& d : g.shape(init.value)) dims.push_back(d.value);
  const ScalarType dtype = g.info(init.value).dtype;
  if (is_complex(dtype)) dims.push_back(2);  // complex bytes are (real, imaginary) pairs already
  if (!dims.empty()) m.packed_int64_field(tensor_f::dims, dims);
  m.varint_field(tensor_f::data_type, static_cast<uint64_t>(stored_dtype(dtype)));
  m.bytes_field(tensor_f::name, g.name(init.value));
  if (external != nullptr && !init.computed && init.nbytes > 0) {
    const auto* bytes = static_cast<const uint8_t*>(init.data);
    for (const ExternalData::Reference& r : external->references) {
      if (bytes >= r.begin && bytes + init.nbytes <= r.begin + r.size) {
        external_entry(m, "location", r.location);
        external_entry(m, "offset", std::to_string(bytes - r.begin));
        external_entry(m, "length", std::to_string(init.nbytes));
        m.varint_field(tensor_f::data_location, kDataLocationExternal);
        return m;
      }
    }
  }
  if (external != nullptr && init.nbytes >= external->threshold) {
    const size_t offset = external->place(init);
    external_entry(m, "location", external->location);
    external_entry(m, "offset", std::to_string(offset));
    external_entry(m, "length", std::to_string(init.nbytes));
    m.varint_field(tensor_f::data_location, kDataLocationExternal);
    return m;
  }
  if (init.computed) {
    m.computed_bytes_field(tensor_f::raw_data, init.computed.get());
  } else {
    m.borrowed_bytes_field(tensor_f::raw_data, init.data, init.nbytes);
  }
  return m;
}

// Writes the main graph and, inside the attributes of the nodes that own them, its subgraphs;
// the nodes of local functions too (`outlined`: the functions and the main graph's order).
class GraphWriter {
 public:
  GraphWriter(const Graph& g, const Outlined* outlined)
      : g_(g), nodes_of_(g.num_subgraphs() + 1), used_(g.num_values(), false), is_output_(g.num_values(), false) {
    for (const NodeId n : g.node_ids()) {
      const Node& node = g.node(n);
      if (node.dead) continue;
      nodes_of_[node.graph.index].push_back(n);
      for (const Value in : g.inputs(n)) {
        if (in.valid()) used_[in.id] = true;
      }
    }
    if (outlined != nullptr) nodes_of_[kMainGraph.index] = outlined->main_order;
    for (const Value out : g.graph_outputs()) used_[out.id] = is_output_[out.id] = true;
    for (const GraphId sub : g.subgraph_ids()) {
      for (const Value out : g.subgraph(sub).outputs) used_[out.id] = is_output_[out.id] = true;
    }
  }

  // Whether a node of any graph reads the value (or it is an output): an initializer only a
  // subgraph reads is still written, in the main graph, where the subgraph finds it by name.
  bool used(Value v) const { return used_[v.id]; }

  // The nodes of `graph` and the value_info of what they compute.
  void add_nodes(ProtoMessage& graph, GraphId id) const {
    for (const NodeId n : nodes_of_[id.index]) graph.message_field(graph_f::node, node(n));
    // Shapes torch.export recorded for intermediate values: they document the graph and let the
    // checker's strict shape inference catch a converter that disagrees with torch.
    for (const NodeId n : nodes_of_[id.index]) {
      for (const Value out : g_.outputs(n)) {
        const ValueInfo& vi = g_.info(out);
        if (vi.has_shape && !vi.rank_varies && vi.dtype != ScalarType::Undefined && !is_output_[out.id]) {
          graph.message_field(graph_f::value_info, value_info(g_, out));
        }
      }
    }
  }

  // Appends the nodes of the subgraphs node `n` owns, nested ones included.
  void add_subgraph_nodes(NodeId n, std::vector<NodeId>& out) const {
    for (const Attr& a : g_.attrs(n)) {
      if (a.kind() != Attr::Kind::Graph) continue;
      for (const NodeId inner : nodes_of_[a.as_graph().index]) {
        out.push_back(inner);
        add_subgraph_nodes(inner, out);
      }
    }
  }

  ProtoMessage node(NodeId n) const {
    const Node& node = g_.node(n);
    ProtoMessage m;
    for (const Value in : g_.inputs(n)) m.bytes_field(node_f::input, in.valid() ? g_.name(in) : std::string_view());
    for (const Value out : g_.outputs(n)) m.bytes_field(node_f::output, g_.name(out));
    m.bytes_field(node_f::name, g_.strings.str(node.name));
    m.bytes_field(node_f::op_type, g_.strings.str(node.op_type));
    const auto subgraph = [&](const Attr& a) {
      return this->subgraph(a.as_graph(), std::string(g_.strings.str(node.name)) + "_" + std::string(a.name.str()));
    };
    for (const Attr& a : g_.attrs(n)) m.message_field(node_f::attribute, attribute(a, subgraph));
    if (node.domain != kNoName) m.bytes_field(node_f::domain, g_.strings.str(node.domain));
    return m;
  }

 private:
  ProtoMessage subgraph(GraphId id, const std::string& name) const {
    ProtoMessage graph;
    add_nodes(graph, id);
    graph.bytes_field(graph_f::name, name);
    const Subgraph& sub = g_.subgraph(id);
    for (const Value in : sub.inputs) graph.message_field(graph_f::input, value_info(g_, in));
    for (const Value out : sub.outputs) graph.message_field(graph_f::output, value_info(g_, out));
    return graph;
  }

  const Graph& g_;
  std::vector<std::vector<NodeId>> nodes_of_;  // by graph id: its live nodes, in order
  std::vector<bool> used_, is_output_;         // by value id
};

ProtoMessage opset_import(std::string_view domain, int64_t version) {
  ProtoMessage m;
  m.bytes_field(opset_f::domain, domain);
  m.int64_field(opset_f::version, version);
  return m;
}

// OperatorSetIdProtos of the domains other than ONNX's that `nodes` use, in order of first use.
std::vector<ProtoMessage> custom_opset_imports(const Graph& g, const ModelInfo& info,
                                               const std::vector<NodeId>& nodes) {
  std::vector<StrId> domains;
  std::vector<ProtoMessage> out;
  for (NodeId n : nodes) {
    const StrId domain = g.node(n).domain;
    if (domain == kNoName || std::find(domains.begin(), domains.end(), domain) != domains.end()) continue;
    domains.push_back(domain);
    int64_t version = 1;
    for (const auto& [name, v] : info.domain_versions) {
      if (name == g.strings.str(domain)) version = v;
    }
    out.push_back(opset_import(g.strings.str(domain), version));
  }
  return out;
}

// A FunctionProto: its small constants as Constant nodes, then its body.
ProtoMessage function(const Graph& g, const ModelInfo& info, const GraphWriter& writer, const LocalFunction& f) {
  ProtoMessage m;
  m.bytes_field(function_f::name, f.name);
  for (const Value in : f.inputs) m.bytes_field(function_f::input, g.name(in));
  for (const Value out : f.outputs) m.bytes_field(function_f::output, g.name(out));
  for (const Value c : f.constants) {
    ProtoMessage value;
    value.bytes_field(attr_f::name, "value");
    value.message_field(attr_f::t, tensor(g, *g.initializer(c), nullptr));
    value.varint_field(attr_f::type, attr_type::TENSOR);
    ProtoMessage node;
    node.bytes_field(node_f::output, g.name(c));
    node.bytes_field(node_f::op_type, "Constant");
    node.message_field(node_f::attribute, value);
    m.message_field(function_f::node, node);
  }
  std::vector<NodeId> nodes = f.body;  // and the nodes of their subgraphs, for the opset imports
  for (NodeId n : f.body) {
    m.message_field(function_f::node, writer.node(n));
    writer.add_subgraph_nodes(n, nodes);
  }
  m.message_field(function_f::opset_import, opset_import("", info.opset));
  for (const ProtoMessage& custom : custom_opset_imports(g, info, nodes))
    m.message_field(function_f::opset_import, custom);
  m.bytes_field(function_f::domain, kFunctionDomain);
  return m;
}

}  // namespace

ProtoMessage serialize_model(Graph& g, const ModelInfo& info, ExternalData* external) {
  g.name_all();
  const GraphWriter writer(g, info.outlined);
  ProtoMessage graph;
  writer.add_nodes(graph, kMainGraph);
  graph.bytes_field(graph_f::name, info.graph_name);
  for (const Initializer& init : g.initializers()) {
    if (writer.used(init.value)) graph.message_field(graph_f::initializer, tensor(g, init, external));
  }
  for (const Value in : g.graph_inputs()) graph.message_field(graph_f::input, value_info(g, in));
  for (const Initializer& init : g.initializers()) {
    if (init.overridable && writer.used(init.value)) graph.message_field(graph_f::input, value_info(g, init.value));
  }
  for (const Value out : g.graph_outputs()) graph.message_field(graph_f::output, value_info(g, out));

  ProtoMessage model;
  model.varint_field(model_f::ir_version, static_cast<uint64_t>(ir_version_for_opset(info.opset)));
  model.bytes_field(model_f::producer_name, info.producer_name);
  model.bytes_field(model_f::producer_version, info.producer_version);
  model.message_field(model_f::graph, graph);
  model.message_field(model_f::opset_import, opset_import("", info.opset));
  // Every domain a node uses, in the main graph or in a function.
  std::vector<NodeId> all_nodes;
  for (const NodeId n : g.node_ids()) {
    if (!g.node(n).dead) all_nodes.push_back(n);
  }
  if (info.outlined != nullptr) {
    for (const LocalFunction& f : info.outlined->functions)
      all_nodes.insert(all_nodes.end(), f.body.begin(), f.body.end());
  }
  for (const ProtoMessage& custom : custom_opset_imports(g, info, all_nodes))
    model.message_field(model_f::opset_import, custom);
  if (info.outlined != nullptr) {
    for (const LocalFunction& f : info.outlined->functions)
      model.message_field(model_f::functions, function(g, info, writer, f));
  }
  for (const std::string& f : info.function_protos) model.bytes_field(model_f::functions, f);
  return model;
}

namespace {

// Bytes the export made itself (a small weight transposed while folding, a constant) are found
// again by their content; a model's tensors by their memory, computed ones by what computes them.
bool by_content(const Initializer& init) { return !init.computed && !init.model_tensor; }

size_t placement_key(const Initializer& init) {
  if (by_content(init)) return std::hash<std::string_view>{}({static_cast<const char*>(init.data), init.nbytes});
  return std::hash<const void*>{}(init.computed ? init.computed->source().data() : init.data);
}

bool same_bytes(const Initializer& a, const Initializer& b) {
  if (a.computed || b.computed) return a.computed && b.computed && a.computed->same_bytes(*b.computed);
  if (a.nbytes != b.nbytes) return false;
  if (a.data == b.data) return true;
  return by_content(a) && by_content(b) && std::memcmp(a.data, b.data, a.nbytes) == 0;
}

}  // namespace

size_t ExternalData::place(const Initializer& init) {
  const size_t key = placement_key(init);
  const auto [first, last] = placed_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    const Placement& p = placements[it->second];
    if (same_bytes(*p.initializer, init)) return p.offset;
  }
  const size_t align = init.nbytes >= kPageAlignedBytes ? kPage : kSmallAlignment;
  const size_t offset = (size + align - 1) / align * align;
  placed_.emplace(key, placements.size());
  placements.push_back({offset, &init});
  size = offset + init.nbytes;
  return offset;
}

std::vector<const TensorBytes*> ExternalData::computed() const {
  std::vector<const TensorBytes*> order;
  for (const Placement& p : placements) {
    if (p.initializer->computed) order.push_back(p.initializer->computed.get());
  }
  return order;
}

void write_external_data(const ExternalData& external, const ByteSink& sink, Prefetcher* ahead) {
  static const char zeros[kPage] = {};
  // A checkpoint more than half the memory available could not stay in the page cache anyway: each
  // weight's pages are evicted once written (read_pages.h). A smaller one stays, for the next export.
  const auto sources = [](const Initializer& init) {
    return init.computed ? init.computed->sources()
                         : std::vector{std::span<const uint8_t>(static_cast<const uint8_t*>(init.data), init.nbytes)};
  };
  size_t mapped = 0;
  for (const auto& [offset, init] : external.placements) {
    for (const auto bytes : sources(*init)) {
      if (in_read_only_mapping(bytes.data(), bytes.size())) mapped += bytes.size();
    }
  }
  const bool release = mapped > available_memory() / 2;
  size_t at = 0;
  for (const auto& [offset, init] : external.placements) {
    for (; at < offset; at += std::min(offset - at, kPage)) sink(zeros, std::min(offset - at, kPage));
    if (init->computed) {
      produce_computed(*init->computed, sink, ahead);
    } else if (init->nbytes) {
      sink(init->data, init->nbytes);
    }
    if (release) {
      for (const auto bytes : sources(*init)) release_read_pages(bytes.data(), bytes.size());
    }
    at = offset + init->nbytes;
  }
}

}  // namespace fastonnx
