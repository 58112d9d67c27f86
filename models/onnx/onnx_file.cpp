// ModelProto, GraphProto, NodeProto and AttributeProto read from the wire format (onnx_wire.h);
// tensors are decoded by onnx_tensor.cpp.
#include "models/onnx/onnx_file.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "models/onnx/onnx_wire.h"

namespace vrun::onnx {

namespace {

using wire::parse_tensor;
using wire::read_ints;
using wire::read_reals;
using wire::Reader;

constexpr int kMaxDepth = 16;  // subgraphs (If branches) nested deeper are refused

Status parse_graph(const uint8_t* d, size_t n, const std::string& what, int depth, Graph* g);

Status parse_attribute(const uint8_t* d, size_t n, const std::string& what, int depth, Attribute* a) {
  Reader r(d, n, what);
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    uint64_t v = 0;
    uint32_t u = 0;
    const uint8_t* p = nullptr;
    size_t len = 0;
    switch (f) {
      case 1:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name"));
        VRUN_RETURN_IF_ERROR(r.str(&a->name));
        break;
      case 2: {
        VRUN_RETURN_IF_ERROR(r.expect(w, 5, "f"));
        VRUN_RETURN_IF_ERROR(r.fixed32(&u));
        float fl;
        std::memcpy(&fl, &u, 4);
        a->f = fl;
        break;
      }
      case 3:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "i"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        a->i = static_cast<int64_t>(v);
        break;
      case 4:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "s"));
        VRUN_RETURN_IF_ERROR(r.str(&a->s));
        break;
      case 5:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "t"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        VRUN_RETURN_IF_ERROR(parse_tensor(p, len, what + " attribute '" + a->name + "'", &a->t));
        break;
      case 6:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "g"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        if (depth >= kMaxDepth) return r.fail("subgraphs nest deeper than " + std::to_string(kMaxDepth));
        a->g = std::make_shared<Graph>();
        VRUN_RETURN_IF_ERROR(
            parse_graph(p, len, what + " subgraph '" + a->name + "'", depth + 1, a->g.get()));
        break;
      case 7:
        VRUN_RETURN_IF_ERROR(read_reals<float>(r, w, &a->floats));
        break;
      case 8:
        VRUN_RETURN_IF_ERROR(read_ints(r, w, &a->ints));
        break;
      case 20:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "type"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        a->type = static_cast<Attribute::Type>(v);
        break;
      default:
        VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  return Status::ok();
}

Status parse_node(const uint8_t* d, size_t n, const std::string& what, int depth, Node* node) {
  Reader r(d, n, what);
  std::vector<std::pair<const uint8_t*, size_t>> attrs;
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    std::string s;
    const uint8_t* p = nullptr;
    size_t len = 0;
    switch (f) {
      case 1:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "input"));
        VRUN_RETURN_IF_ERROR(r.str(&s));
        node->inputs.push_back(s);
        break;
      case 2:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "output"));
        VRUN_RETURN_IF_ERROR(r.str(&s));
        node->outputs.push_back(s);
        break;
      case 3:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name"));
        VRUN_RETURN_IF_ERROR(r.str(&node->name));
        break;
      case 4:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "op_type"));
        VRUN_RETURN_IF_ERROR(r.str(&node->op_type));
        break;
      case 5:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "attribute"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        attrs.emplace_back(p, len);
        break;
      case 7:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "domain"));
        VRUN_RETURN_IF_ERROR(r.str(&node->domain));
        break;
      default:
        VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  const std::string who = what + " node '" + node->name + "' (" + node->op_type + ")";
  for (const auto& [p, len] : attrs) {
    node->attributes.emplace_back();
    VRUN_RETURN_IF_ERROR(parse_attribute(p, len, who, depth, &node->attributes.back()));
  }
  return Status::ok();
}

Status parse_dims(const uint8_t* d, size_t n, const std::string& what, ValueInfo* vi) {
  // TypeProto { tensor_type = 1 { elem_type = 1, shape = 2 { dim = 1 { dim_value = 1, dim_param = 2 } } } }
  Reader r(d, n, what);
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    if (f != 1 || w != 2) {
      VRUN_RETURN_IF_ERROR(r.skip(w));
      continue;
    }
    const uint8_t* p = nullptr;
    size_t len = 0;
    VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
    Reader tt(p, len, what);
    while (!tt.done()) {
      VRUN_RETURN_IF_ERROR(tt.tag(&f, &w));
      if (f == 1 && w == 0) {
        uint64_t v = 0;
        VRUN_RETURN_IF_ERROR(tt.varint(&v));
        vi->elem_type = static_cast<int32_t>(v);
      } else if (f == 2 && w == 2) {
        vi->has_shape = true;
        const uint8_t* sp = nullptr;
        size_t sn = 0;
        VRUN_RETURN_IF_ERROR(tt.bytes(&sp, &sn));
        Reader sr(sp, sn, what);
        while (!sr.done()) {
          VRUN_RETURN_IF_ERROR(sr.tag(&f, &w));
          if (f != 1 || w != 2) {
            VRUN_RETURN_IF_ERROR(sr.skip(w));
            continue;
          }
          const uint8_t* dp = nullptr;
          size_t dn = 0;
          VRUN_RETURN_IF_ERROR(sr.bytes(&dp, &dn));
          Reader dr(dp, dn, what);
          Dim dim;
          while (!dr.done()) {
            VRUN_RETURN_IF_ERROR(dr.tag(&f, &w));
            if (f == 1 && w == 0) {
              uint64_t v = 0;
              VRUN_RETURN_IF_ERROR(dr.varint(&v));
              dim.value = static_cast<int64_t>(v);
            } else if (f == 2 && w == 2) {
              VRUN_RETURN_IF_ERROR(dr.str(&dim.param));
            } else {
              VRUN_RETURN_IF_ERROR(dr.skip(w));
            }
          }
          vi->dims.push_back(dim);
        }
      } else {
        VRUN_RETURN_IF_ERROR(tt.skip(w));
      }
    }
  }
  return Status::ok();
}

Status parse_value_info(const uint8_t* d, size_t n, const std::string& what, ValueInfo* vi) {
  Reader r(d, n, what);
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    if (f == 1) {
      VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name"));
      VRUN_RETURN_IF_ERROR(r.str(&vi->name));
    } else if (f == 2) {
      VRUN_RETURN_IF_ERROR(r.expect(w, 2, "type"));
      const uint8_t* p = nullptr;
      size_t len = 0;
      VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
      VRUN_RETURN_IF_ERROR(parse_dims(p, len, what, vi));
    } else {
      VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  return Status::ok();
}

Status parse_graph(const uint8_t* d, size_t n, const std::string& what, int depth, Graph* g) {
  Reader r(d, n, what);
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    const uint8_t* p = nullptr;
    size_t len = 0;
    if (f == 1 || f == 5 || f == 11 || f == 12) {
      VRUN_RETURN_IF_ERROR(r.expect(w, 2, "graph field"));
      VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
    }
    switch (f) {
      case 1:
        g->nodes.emplace_back();
        VRUN_RETURN_IF_ERROR(parse_node(p, len, what, depth, &g->nodes.back()));
        break;
      case 2:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name"));
        VRUN_RETURN_IF_ERROR(r.str(&g->name));
        break;
      case 5:
        g->initializers.emplace_back();
        VRUN_RETURN_IF_ERROR(parse_tensor(p, len, what + " initializer", &g->initializers.back()));
        break;
      case 11:
        g->inputs.emplace_back();
        VRUN_RETURN_IF_ERROR(parse_value_info(p, len, what + " input", &g->inputs.back()));
        break;
      case 12:
        g->outputs.emplace_back();
        VRUN_RETURN_IF_ERROR(parse_value_info(p, len, what + " output", &g->outputs.back()));
        break;
      default:
        VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
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
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    uint64_t v = 0;
    const uint8_t* p = nullptr;
    size_t len = 0;
    switch (f) {
      case 1:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "ir_version"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        m.ir_version = static_cast<int64_t>(v);
        break;
      case 2:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "producer_name"));
        VRUN_RETURN_IF_ERROR(r.str(&m.producer));
        break;
      case 7:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "graph"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        VRUN_RETURN_IF_ERROR(parse_graph(p, len, name, 0, &m.graph));
        has_graph = true;
        break;
      case 8: {
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "opset_import"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        Reader o(p, len, name);
        std::string domain;
        int64_t version = 0;
        while (!o.done()) {
          int of = 0, ow = 0;
          VRUN_RETURN_IF_ERROR(o.tag(&of, &ow));
          if (of == 1 && ow == 2) {
            VRUN_RETURN_IF_ERROR(o.str(&domain));
          } else if (of == 2 && ow == 0) {
            VRUN_RETURN_IF_ERROR(o.varint(&v));
            version = static_cast<int64_t>(v);
          } else {
            VRUN_RETURN_IF_ERROR(o.skip(ow));
          }
        }
        m.opsets[domain] = version;
        break;
      }
      default:
        VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  if (!has_graph || m.ir_version == 0)
    return err(ErrorCode::kInvalidProgram, name, ": not an ONNX model (no ",
               has_graph ? "ir_version" : "graph", ")");
  return m;
}

Result<Model> read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return err(ErrorCode::kNotFound, path, ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  return parse_model(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

}  // namespace vrun::onnx
