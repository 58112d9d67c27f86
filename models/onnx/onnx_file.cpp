// ModelProto, GraphProto, NodeProto and AttributeProto read from the wire format (onnx_wire.h);
// tensors are decoded by onnx_tensor.cpp.
#include "models/onnx/onnx_file.h"

#include <cstring>

#include "models/common/files.h"
#include "models/onnx/onnx_wire.h"

namespace vrun::onnx {

namespace {

using wire::for_each_field;
using wire::parse_tensor;
using wire::read_ints;
using wire::read_reals;
using wire::Reader;

constexpr int kMaxDepth = 16;  // subgraphs (If branches) nested deeper are refused

Status parse_graph(const uint8_t* d, size_t n, const std::string& what, int depth, Graph* g);

Status parse_attribute(const uint8_t* d, size_t n, const std::string& what, int depth, Attribute* a) {
  Reader r(d, n, what);
  return for_each_field(r, [&](int f, int w) -> Status {
    const uint8_t* p = nullptr;
    size_t len = 0;
    switch (f) {
      case 1:
        return r.str_field(w, "name", &a->name);
      case 2: {
        uint32_t u = 0;
        VRUN_RETURN_IF_ERROR(r.expect(w, 5, "f"));
        VRUN_RETURN_IF_ERROR(r.fixed32(&u));
        float fl;
        std::memcpy(&fl, &u, 4);
        a->f = fl;
        return Status::ok();
      }
      case 3:
        return r.varint_field(w, "i", &a->i);
      case 4:
        return r.str_field(w, "s", &a->s);
      case 5:
        VRUN_RETURN_IF_ERROR(r.bytes_field(w, "t", &p, &len));
        return parse_tensor(p, len, what + " attribute '" + a->name + "'", &a->t);
      case 6:
        VRUN_RETURN_IF_ERROR(r.bytes_field(w, "g", &p, &len));
        if (depth >= kMaxDepth) return r.fail("subgraphs nest deeper than " + std::to_string(kMaxDepth));
        a->g = std::make_shared<Graph>();
        return parse_graph(p, len, what + " subgraph '" + a->name + "'", depth + 1, a->g.get());
      case 7:
        return read_reals<float>(r, w, &a->floats);
      case 8:
        return read_ints(r, w, &a->ints);
      case 20:
        return r.varint_field(w, "type", &a->type);
      default:
        return r.skip(w);
    }
  });
}

Status parse_node(const uint8_t* d, size_t n, const std::string& what, int depth, Node* node) {
  Reader r(d, n, what);
  std::vector<std::pair<const uint8_t*, size_t>> attrs;
  auto append = [&](int w, const char* field, std::vector<std::string>* to) {
    to->emplace_back();
    return r.str_field(w, field, &to->back());
  };
  VRUN_RETURN_IF_ERROR(for_each_field(r, [&](int f, int w) -> Status {
    const uint8_t* p = nullptr;
    size_t len = 0;
    switch (f) {
      case 1:
        return append(w, "input", &node->inputs);
      case 2:
        return append(w, "output", &node->outputs);
      case 3:
        return r.str_field(w, "name", &node->name);
      case 4:
        return r.str_field(w, "op_type", &node->op_type);
      case 5:
        VRUN_RETURN_IF_ERROR(r.bytes_field(w, "attribute", &p, &len));
        attrs.emplace_back(p, len);
        return Status::ok();
      case 7:
        return r.str_field(w, "domain", &node->domain);
      default:
        return r.skip(w);
    }
  }));
  const std::string who = what + " node '" + node->name + "' (" + node->op_type + ")";
  for (const auto& [p, len] : attrs) {
    node->attributes.emplace_back();
    VRUN_RETURN_IF_ERROR(parse_attribute(p, len, who, depth, &node->attributes.back()));
  }
  return Status::ok();
}

// Calls on(sub) with a Reader over each field `field` of r that is a message; other fields are
// skipped.
template <typename F>
Status each_message(Reader& r, int field, F on) {
  return for_each_field(r, [&](int f, int w) -> Status {
    if (f != field || w != 2) return r.skip(w);
    Reader sub(nullptr, 0, r.what());
    VRUN_RETURN_IF_ERROR(r.message(&sub));
    return on(sub);
  });
}

// TypeProto.tensor_type.shape: TensorShapeProto { dim = 1 { dim_value = 1, dim_param = 2 } }.
Status parse_shape(Reader& sr, ValueInfo* vi) {
  return each_message(sr, 1, [&](Reader& dr) -> Status {
    Dim dim;
    VRUN_RETURN_IF_ERROR(for_each_field(dr, [&](int f, int w) -> Status {
      if (f == 1 && w == 0) return dr.varint_as(&dim.value);
      if (f == 2 && w == 2) return dr.str(&dim.param);
      return dr.skip(w);
    }));
    vi->dims.push_back(dim);
    return Status::ok();
  });
}

Status parse_dims(const uint8_t* d, size_t n, const std::string& what, ValueInfo* vi) {
  // TypeProto { tensor_type = 1 { elem_type = 1, shape = 2 } }
  Reader r(d, n, what);
  return each_message(r, 1, [&](Reader& tt) {
    return for_each_field(tt, [&](int f, int w) -> Status {
      if (f == 1 && w == 0) return tt.varint_as(&vi->elem_type);
      if (f != 2 || w != 2) return tt.skip(w);
      vi->has_shape = true;
      Reader sr(nullptr, 0, what);
      VRUN_RETURN_IF_ERROR(tt.message(&sr));
      return parse_shape(sr, vi);
    });
  });
}

Status parse_value_info(const uint8_t* d, size_t n, const std::string& what, ValueInfo* vi) {
  Reader r(d, n, what);
  return for_each_field(r, [&](int f, int w) -> Status {
    if (f == 1) return r.str_field(w, "name", &vi->name);
    if (f != 2) return r.skip(w);
    const uint8_t* p = nullptr;
    size_t len = 0;
    VRUN_RETURN_IF_ERROR(r.bytes_field(w, "type", &p, &len));
    return parse_dims(p, len, what, vi);
  });
}

Status parse_graph(const uint8_t* d, size_t n, const std::string& what, int depth, Graph* g) {
  Reader r(d, n, what);
  return for_each_field(r, [&](int f, int w) -> Status {
    const uint8_t* p = nullptr;
    size_t len = 0;
    if (f == 1 || f == 5 || f == 11 || f == 12)
      VRUN_RETURN_IF_ERROR(r.bytes_field(w, "graph field", &p, &len));
    switch (f) {
      case 1:
        return parse_node(p, len, what, depth, &g->nodes.emplace_back());
      case 2:
        return r.str_field(w, "name", &g->name);
      case 5:
        return parse_tensor(p, len, what + " initializer", &g->initializers.emplace_back());
      case 11:
        return parse_value_info(p, len, what + " input", &g->inputs.emplace_back());
      case 12:
        return parse_value_info(p, len, what + " output", &g->outputs.emplace_back());
      default:
        return r.skip(w);
    }
  });
}

// OperatorSetIdProto { domain = 1, version = 2 }.
Status parse_opset(Reader& o, Model* m) {
  std::string domain;
  int64_t version = 0;
  VRUN_RETURN_IF_ERROR(for_each_field(o, [&](int f, int w) -> Status {
    if (f == 1 && w == 2) return o.str(&domain);
    if (f == 2 && w == 0) return o.varint_as(&version);
    return o.skip(w);
  }));
  m->opsets[domain] = version;
  return Status::ok();
}

}  // namespace

const char* elem_type_name(int32_t t) {
  static const char* names[] = {"undefined", "float",  "uint8",     "int8",       "uint16",  "int16",
                                "int32",     "int64",  "string",    "bool",       "float16", "double",
                                "uint32",    "uint64", "complex64", "complex128", "bfloat16"};
  return t >= 0 && t < static_cast<int32_t>(sizeof(names) / sizeof(names[0])) ? names[t] : "unknown";
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const Attribute* Node::attr(const std::string& n) const {
  for (const auto& a : attributes)
    if (a.name == n) return &a;
  return nullptr;
}

int64_t Model::opset() const {
  auto it = opsets.find("");
  if (it == opsets.end()) it = opsets.find("ai.onnx");
  return it == opsets.end() ? 0 : it->second;
}

Result<Model> parse_model(const uint8_t* data, size_t size, const std::string& name) {
  Model m;
  Reader r(data, size, name);
  bool has_graph = false;
  VRUN_RETURN_IF_ERROR(for_each_field(r, [&](int f, int w) -> Status {
    const uint8_t* p = nullptr;
    size_t len = 0;
    Reader o(nullptr, 0, name);
    switch (f) {
      case 1:
        return r.varint_field(w, "ir_version", &m.ir_version);
      case 2:
        return r.str_field(w, "producer_name", &m.producer);
      case 7:
        VRUN_RETURN_IF_ERROR(r.bytes_field(w, "graph", &p, &len));
        VRUN_RETURN_IF_ERROR(parse_graph(p, len, name, 0, &m.graph));
        has_graph = true;
        return Status::ok();
      case 8:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "opset_import"));
        VRUN_RETURN_IF_ERROR(r.message(&o));
        return parse_opset(o, &m);
      default:
        return r.skip(w);
    }
  }));
  if (!has_graph || m.ir_version == 0)
    return err(ErrorCode::kInvalidProgram, name, ": not an ONNX model (no ",
               has_graph ? "ir_version" : "graph", ")");
  return m;
}

Result<Model> read_model(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(const std::string bytes, models::read_file(path));
  return parse_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

}  // namespace vrun::onnx
