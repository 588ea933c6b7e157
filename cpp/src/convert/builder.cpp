#include "fastonnx/builder.h"

#include <cstring>
#include <memory>
#include <string>

#include "fastonnx/numeric.h"
#include "fastonnx/onnx_types.h"
#include "fastonnx/typecheck.h"

namespace fastonnx {

std::vector<Value> Builder::custom_op(std::string_view domain, std::string_view type, const Inputs& inputs,
                                      const Attrs& attrs, int n_outputs) {
  if (domain.empty() || domain == "ai.onnx") return op_named(type, inputs, attrs, n_outputs);
  const NodeId n = g_.add_node(type, domain, inputs, static_cast<uint32_t>(n_outputs), attrs, insertion_graph_);
  const auto outs = g_.outputs(n);
  return {outs.begin(), outs.end()};
}

std::vector<Value> Builder::op_named(std::string_view type, const Inputs& inputs, const Attrs& attrs, int n_outputs) {
  const OnnxArity* op = onnx_arity(type);
  if (op == nullptr) fail("ONNX has no operator " + std::string(type) + " at opset " + std::to_string(opset_));
  return add(*op, inputs, attrs, n_outputs);
}

std::vector<Value> Builder::add(const OnnxArity& op, const Inputs& inputs, const Attrs& attrs, int n_outputs) {
  const std::string_view type = op.name;
  const size_t n_in = inputs.size();
  const auto n_out = static_cast<size_t>(n_outputs);
  if (n_in < op.min_inputs || n_in > op.max_inputs || n_out < op.min_outputs || n_out > op.max_outputs) {
    fail("ONNX " + std::string(type) + " takes " + std::to_string(op.min_inputs) + " to " +
         std::to_string(op.max_inputs) + " inputs and makes " + std::to_string(op.min_outputs) + " to " +
         std::to_string(op.max_outputs) + " outputs; this node has " + std::to_string(n_in) + " and " +
         std::to_string(n_outputs));
  }
  const OpTypes* types = onnx_types(type, opset_);
  if (types == nullptr) fail("ONNX has no operator " + std::string(type) + " at opset " + std::to_string(opset_));
  // Complex inputs are real pairs to ONNX; their outputs stay complex in the graph.
  std::vector<ScalarType> logical, written;
  for (const Input& in : inputs) {
    const ScalarType t = in.value.valid() ? dtype(in.value) : ScalarType::Undefined;
    if (is_complex(t) && !complex_pairs_) {
      fail("complex tensors are not supported by this converter (ONNX " + std::string(type) +
           "); compute on the real and imaginary parts (torch.view_as_real) instead");
    }
    logical.push_back(t);
    written.push_back(is_complex(t) ? real_part_type(t) : t);
  }
  if (const std::string error = input_types_error(type, opset_, *types, written); !error.empty()) fail(error);
  for (size_t i = 0; i < static_cast<size_t>(n_outputs); ++i) {
    // A node ONNX itself types complex (a Cast to complex64) could never be declared with its
    // type, the graph holding complex values as real pairs.
    if (is_complex(output_type(*types, i, written, attrs))) {
      fail("ONNX " + std::string(type) +
           " would make complex values; they are real (real, imaginary) pairs here "
           "(Builder::cast converts to complex dtypes)");
    }
  }
  const NodeId n = g_.add_node(type, "", inputs, static_cast<uint32_t>(n_outputs), attrs, insertion_graph_);
  std::vector<Value> outs;
  outs.reserve(n_outputs);
  for (const Value v : g_.outputs(n)) {
    g_.set_dtype(v, output_type(*types, outs.size(), logical, attrs));
    outs.push_back(v);
  }
  return outs;
}

GraphId Builder::begin_subgraph() {
  insertion_graph_ = g_.add_subgraph(insertion_graph_);
  return insertion_graph_;
}

Value Builder::subgraph_input(std::string_view name, ScalarType dtype, std::span<const Dim> dims) {
  if (insertion_graph_ == kMainGraph) fail("a subgraph input `" + std::string(name) + "` outside any subgraph");
  return g_.add_subgraph_input(insertion_graph_, name, dtype, dims);
}

GraphId Builder::end_subgraph(const std::vector<Value>& outputs) {
  if (insertion_graph_ == kMainGraph) fail("end_subgraph without begin_subgraph");
  const GraphId graph = insertion_graph_;
  std::vector<Value> taken;
  for (const Value value : outputs) {
    Value v = value;
    // Like a graph output, a subgraph output is produced by a node of its own subgraph: an outer
    // value, a weight, a subgraph input or a value already returned gets an Identity (which also
    // keeps the passes from replacing the output by an outer value).
    const NodeId producer = g_.info(v).producer;
    if (producer == kNoNode || g_.node(producer).graph != graph ||
        std::find(taken.begin(), taken.end(), v) != taken.end()) {
      v = op<"Identity">({value});
      if (g_.info(value).has_shape) {
        std::vector<Dim> dims(g_.shape(value).begin(), g_.shape(value).end());
        g_.set_shape(v, dims);
      }
      g_.set_container_like(v, value);
    }
    taken.push_back(v);
    g_.add_subgraph_output(graph, v);
  }
  insertion_graph_ = g_.subgraph(graph).parent;
  return graph;
}

namespace {

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void encode(std::vector<uint8_t>& out, const Scalar& s, ScalarType dtype) {
  switch (dtype) {
    case ScalarType::Float:
      put(out, static_cast<float>(s.to_double()));
      break;
    case ScalarType::Double:
      put(out, s.to_double());
      break;
    case ScalarType::Half:
      put(out, float_to_half(static_cast<float>(s.to_double())));
      break;
    case ScalarType::BFloat16:
      put(out, float_to_bfloat16(static_cast<float>(s.to_double())));
      break;
    case ScalarType::Long:
      put(out, s.to_int());
      break;
    case ScalarType::Int:
      put(out, static_cast<int32_t>(s.to_int()));
      break;
    case ScalarType::Short:
      put(out, static_cast<int16_t>(s.to_int()));
      break;
    case ScalarType::Char:
      put(out, static_cast<int8_t>(s.to_int()));
      break;
    case ScalarType::Byte:
      put(out, static_cast<uint8_t>(s.to_int()));
      break;
    case ScalarType::UInt16:
      put(out, static_cast<uint16_t>(s.to_int()));
      break;
    case ScalarType::UInt32:
      put(out, static_cast<uint32_t>(s.to_int()));
      break;
    case ScalarType::UInt64:
      put(out, static_cast<uint64_t>(s.to_int()));
      break;
    case ScalarType::Bool:
      put(out, static_cast<uint8_t>(s.to_double() != 0.0));
      break;
    default:
      throw ConvertError(std::string("cannot make a constant of dtype ") + dtype_name(dtype) +
                         (is_complex(dtype) ? "; ONNX has no arithmetic on complex tensors: compute on the real and "
                                              "imaginary parts (torch.view_as_real) instead"
                                            : ""));
  }
}

}  // namespace

Value Builder::constant(ScalarType dtype, std::span<const int64_t> shape, std::vector<uint8_t> bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(std::move(bytes));
  std::vector<Dim> dims;
  dims.reserve(shape.size());
  for (int64_t d : shape) dims.push_back(Dim{d, kNoName});
  const void* data = owned->data();
  const size_t n = owned->size();
  return g_.add_initializer("", dtype, dims, data, n, std::move(owned));
}

Value Builder::scalar(const Scalar& s, ScalarType dtype) {
  if (dtype == ScalarType::Undefined) fail("constant of unknown element type");
  if (!s.is_static()) return cast(s.computed, dtype);
  std::vector<uint8_t> bytes;
  encode(bytes, s, dtype);
  const Value v = constant(dtype, {}, std::move(bytes));
  scalars_.emplace(v.id, s);
  return v;
}

namespace {
bool all_static(const std::vector<Scalar>& items) {
  return std::all_of(items.begin(), items.end(), [](const Scalar& s) { return s.is_static(); });
}
}  // namespace

Value Builder::list(const std::vector<Scalar>& items, ScalarType dtype) {
  if (dtype == ScalarType::Undefined) fail("constant of unknown element type");
  if (!all_static(items)) {
    // Numbers the graph computes join the constant ones in a Concat of 1-element lists.
    Inputs parts;
    const Value axes = ints(std::vector<int64_t>{0});
    for (const Scalar& s : items) {
      parts.push_back(s.is_static() ? list({s}, dtype) : op<"Unsqueeze">({scalar(s, dtype), axes}));
    }
    return op<"Concat">(parts, {Attr::i("axis", 0)});
  }
  std::vector<uint8_t> bytes;
  for (const Scalar& s : items) encode(bytes, s, dtype);
  const int64_t n = static_cast<int64_t>(items.size());
  return constant(dtype, std::span<const int64_t>(&n, 1), std::move(bytes));
}

Value Builder::tensor(const std::vector<Scalar>& items, const std::vector<int64_t>& shape, ScalarType dtype) {
  if (dtype == ScalarType::Undefined) fail("constant of unknown element type");
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(items.size()))
    fail("constant with " + std::to_string(items.size()) + " items for its shape");
  if (!all_static(items)) return op<"Reshape">({list(items, dtype), ints(shape)});
  std::vector<uint8_t> bytes;
  for (const Scalar& s : items) encode(bytes, s, dtype);
  return constant(dtype, shape, std::move(bytes));
}

Value Builder::ints(const std::vector<int64_t>& items) {
  std::vector<uint8_t> bytes(items.size() * sizeof(int64_t));
  if (!items.empty()) std::memcpy(bytes.data(), items.data(), bytes.size());
  const int64_t n = static_cast<int64_t>(items.size());
  return constant(ScalarType::Long, std::span<const int64_t>(&n, 1), std::move(bytes));
}

Value Builder::ints(const SymIntList& items) {
  bool all_static = true;
  for (const SymInt& s : items) all_static = all_static && s.is_static();
  if (all_static) {
    std::vector<int64_t> values;
    values.reserve(items.size());
    for (const SymInt& s : items) values.push_back(s.value);
    return ints(values);
  }
  Inputs parts;
  const Value axes = ints(std::vector<int64_t>{0});
  for (const SymInt& s : items) {
    parts.push_back(s.is_static() ? ints(std::vector<int64_t>{s.value}) : op<"Unsqueeze">({s.sym, axes}));
  }
  return op<"Concat">(parts, {Attr::i("axis", 0)});
}

Value Builder::long_scalar(const SymInt& s) {
  return s.is_static() ? scalar(s.value, ScalarType::Long) : cast(s.sym, ScalarType::Long);
}

std::optional<Value> Builder::ints(const std::optional<std::vector<int64_t>>& items) {
  if (!items) return std::nullopt;
  return ints(*items);
}

std::optional<Value> Builder::ints(const std::optional<SymIntList>& items) {
  if (!items) return std::nullopt;
  return ints(*items);
}

Value Builder::as_complex(Value pairs) {
  const ScalarType t = dtype(pairs);
  const ScalarType complex = t == ScalarType::Double  ? ScalarType::ComplexDouble
                             : t == ScalarType::Float ? ScalarType::ComplexFloat
                             : t == ScalarType::Half  ? ScalarType::ComplexHalf
                                                      : ScalarType::Undefined;
  if (complex == ScalarType::Undefined) fail(std::string("no complex type has parts of type ") + dtype_name(t));
  const Value v = op<"Identity">({pairs});
  g_.set_dtype(v, complex);
  return v;
}

Value Builder::as_real(Value complex) {
  if (!is_complex(dtype(complex))) fail(std::string("expected a complex tensor, got ") + dtype_name(dtype(complex)));
  const Value v = [&] {
    const auto pairs = with_complex_pairs();
    return op<"Identity">({complex});
  }();
  g_.set_dtype(v, real_part_type(dtype(complex)));
  return v;
}

Value Builder::cast(Value v, ScalarType to) {
  if (dtype(v) == to) return v;
  if (is_complex(dtype(v)) || is_complex(to)) return cast_complex(v, to);
  if (auto it = scalars_.find(v.id); it != scalars_.end()) return scalar(it->second, to);
  return op<"Cast">({v}, {Attr::i("to", onnx_dtype(to))});
}

// torch's conversions to and from complex dtypes, on the (real, imaginary) pairs: a real tensor
// gains a zero imaginary part, a complex one keeps its real part (bool: whether either part is
// nonzero), and between complex dtypes the parts are cast.
Value Builder::cast_complex(Value v, ScalarType to) {
  if (is_complex(to)) {
    const ScalarType parts = real_part_type(to);
    if (is_complex(dtype(v))) return as_complex(cast(as_real(v), parts));
    const int64_t r = rank(v);
    std::vector<int64_t> pads(static_cast<size_t>(2 * (r + 1)), 0);
    pads.back() = 1;  // after the real part, on the new last axis
    const Value column = op<"Unsqueeze">({cast(v, parts), ints(std::vector<int64_t>{-1})});
    return as_complex(op<"Pad">({column, ints(pads)}));
  }
  const Value pairs = as_real(v);
  const auto part = [&](int64_t i) {
    return op<"Gather">({pairs, scalar(i, ScalarType::Long)}, {Attr::i("axis", -1)});
  };
  if (to == ScalarType::Bool) return op<"Or">({cast(part(0), to), cast(part(1), to)});
  return cast(part(0), to);
}

void Builder::cast_all(std::vector<Value>& values, ScalarType to) {
  for (Value& v : values) v = cast(v, to);
}

namespace {
int category(ScalarType t) {
  if (t == ScalarType::Bool) return 0;
  if (is_integral(t)) return 1;
  if (is_floating(t)) return 2;
  return 3;
}

ScalarType promote_types(ScalarType a, ScalarType b) {
  if (a == b || b == ScalarType::Undefined) return a;
  if (a == ScalarType::Undefined) return b;
  const int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    const bool a16 = element_size(a) == 2, b16 = element_size(b) == 2;
    if (a16 && b16) return ScalarType::Float;  // half with bfloat16
    return element_size(a) >= element_size(b) ? a : b;
  }
  if (ca == 1) {
    const bool a_unsigned = a == ScalarType::Byte, b_unsigned = b == ScalarType::Byte;
    if (a_unsigned != b_unsigned) {
      const ScalarType other = a_unsigned ? b : a;
      return element_size(other) > 1 ? other : ScalarType::Short;
    }
    return element_size(a) >= element_size(b) ? a : b;
  }
  return element_size(a) >= element_size(b) ? a : b;
}
}  // namespace

ScalarType Builder::result_type(const std::vector<Value>& tensors) const {
  // torch's rule: dimensioned tensors decide, unless a zero-dim tensor is of a higher category.
  ScalarType dimmed = ScalarType::Undefined, zero_dim = ScalarType::Undefined;
  for (Value v : tensors) {
    const ValueInfo& info = g_.info(v);
    ScalarType& slot = (info.has_shape && info.rank == 0) ? zero_dim : dimmed;
    slot = promote_types(slot, info.dtype);
  }
  if (dimmed == ScalarType::Undefined) return zero_dim;
  if (zero_dim != ScalarType::Undefined && category(zero_dim) > category(dimmed)) return zero_dim;
  return dimmed;
}

ScalarType Builder::compute_dtype_of(const std::vector<Value>& tensors) const {
  if (!metas_.empty()) {
    const ScalarType out = metas_[0].dtype;
    if (out != ScalarType::Bool && out != ScalarType::Undefined) return out;
  }
  return result_type(tensors);
}

int64_t Builder::rank(Value v) const {
  if (!has_shape(v)) fail("the rank of value " + std::string(g_.name(v)) + " is not known");
  return static_cast<int64_t>(g_.info(v).rank);
}

std::span<const Dim> Builder::shape(Value v) const {
  if (!has_shape(v)) fail("the shape of value " + std::string(g_.name(v)) + " is not known");
  return g_.shape(v);
}

int64_t Builder::static_int(const SymInt& s) const {
  if (!s.is_static()) fail("a dynamic size is used where ONNX needs a static attribute");
  return s.value;
}

std::vector<int64_t> Builder::static_ints(const SymIntList& s) const {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const SymInt& i : s) out.push_back(static_int(i));
  return out;
}

const TensorMeta& Builder::out_meta(size_t i) const {
  if (i >= metas_.size()) fail("torch.export recorded no metadata for output " + std::to_string(i));
  return metas_[i];
}

Builder::CurrentNode::CurrentNode(Builder& b, std::string_view fx_name, std::span<const TensorMeta> metas)
    : b_(b), origin_(b.g_.with_origin(b.g_.strings.intern(fx_name))) {
  b_.metas_ = metas;
  b_.complex_pairs_ = false;
  b_.rank_dynamic_ = false;
}

Builder::CurrentNode::~CurrentNode() {
  b_.metas_ = {};
  b_.complex_pairs_ = false;
  b_.rank_dynamic_ = false;
}

void Builder::fail(const std::string& message) const { throw ConvertError(message); }

}  // namespace fastonnx
