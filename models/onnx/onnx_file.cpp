// The protobuf wire format, as far as ModelProto needs it: varints, 32/64-bit fixed values and
// length-delimited fields (strings, bytes, sub-messages, packed repeated numbers). Unknown fields
// are skipped; groups (deprecated wire types 3 and 4) are refused.
#include "models/onnx/onnx_file.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include <cmath>

namespace vrun::onnx {

namespace {

constexpr int kMaxDepth = 16;  // subgraphs (If branches) nested deeper are refused
constexpr int64_t kMaxElements = int64_t{1} << 31;

// A window of the buffer being read; every read is bounds-checked.
class Reader {
 public:
  Reader(const uint8_t* p, size_t n, std::string what) : p_(p), end_(p + n), what_(std::move(what)) {}
  bool done() const { return p_ >= end_; }

  Status varint(uint64_t* v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p_ >= end_) return fail("a varint runs past the end");
      const uint8_t b = *p_++;
      r |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) {
        *v = r;
        return Status::ok();
      }
    }
    return fail("a varint is longer than 10 bytes");
  }
  Status tag(int* field, int* wire) {
    uint64_t t = 0;
    VRUN_RETURN_IF_ERROR(varint(&t));
    *field = static_cast<int>(t >> 3);
    *wire = static_cast<int>(t & 7);
    if (*field == 0 || t >> 3 > (1u << 29)) return fail("field number " + std::to_string(t >> 3) + " is invalid");
    return Status::ok();
  }
  Status bytes(const uint8_t** p, size_t* n) {
    uint64_t len = 0;
    VRUN_RETURN_IF_ERROR(varint(&len));
    if (len > static_cast<uint64_t>(end_ - p_))
      return fail("a field of " + std::to_string(len) + " bytes runs past the end (" +
                  std::to_string(end_ - p_) + " left)");
    *p = p_;
    *n = static_cast<size_t>(len);
    p_ += len;
    return Status::ok();
  }
  Status str(std::string* s) {
    const uint8_t* p = nullptr;
    size_t n = 0;
    VRUN_RETURN_IF_ERROR(bytes(&p, &n));
    s->assign(reinterpret_cast<const char*>(p), n);
    return Status::ok();
  }
  Status fixed32(uint32_t* v) {
    if (end_ - p_ < 4) return fail("a 32-bit field runs past the end");
    std::memcpy(v, p_, 4);
    p_ += 4;
    return Status::ok();
  }
  Status fixed64(uint64_t* v) {
    if (end_ - p_ < 8) return fail("a 64-bit field runs past the end");
    std::memcpy(v, p_, 8);
    p_ += 8;
    return Status::ok();
  }
  Status skip(int wire) {
    uint64_t v = 0;
    uint32_t v32 = 0;
    const uint8_t* p = nullptr;
    size_t n = 0;
    switch (wire) {
      case 0: return varint(&v);
      case 1: return fixed64(&v);
      case 2: return bytes(&p, &n);
      case 5: return fixed32(&v32);
      default: return fail("wire type " + std::to_string(wire) + " is not supported");
    }
  }
  Status expect(int wire, int want, const char* field) {
    if (wire == want) return Status::ok();
    return fail(std::string("field ") + field + " has wire type " + std::to_string(wire) + ", expected " +
                std::to_string(want));
  }
  Status fail(const std::string& m) const { return err(ErrorCode::kInvalidProgram, what_, ": ", m); }
  const std::string& what() const { return what_; }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  std::string what_;
};

// A repeated int64 field, packed (wire 2) or one value per tag (wire 0).
Status read_ints(Reader& r, int wire, std::vector<int64_t>* out) {
  if (wire == 0) {
    uint64_t v = 0;
    VRUN_RETURN_IF_ERROR(r.varint(&v));
    out->push_back(static_cast<int64_t>(v));
    return Status::ok();
  }
  VRUN_RETURN_IF_ERROR(r.expect(wire, 2, "ints"));
  const uint8_t* p = nullptr;
  size_t n = 0;
  VRUN_RETURN_IF_ERROR(r.bytes(&p, &n));
  Reader sub(p, n, r.what());
  while (!sub.done()) {
    uint64_t v = 0;
    VRUN_RETURN_IF_ERROR(sub.varint(&v));
    out->push_back(static_cast<int64_t>(v));
  }
  return Status::ok();
}

// A repeated float (fixed32) or double (fixed64) field, packed or not.
template <typename F>
Status read_reals(Reader& r, int wire, std::vector<double>* out) {
  constexpr int kWire = sizeof(F) == 4 ? 5 : 1;
  auto one = [&](Reader& rr) -> Status {
    F f;
    if constexpr (sizeof(F) == 4) {
      uint32_t u = 0;
      VRUN_RETURN_IF_ERROR(rr.fixed32(&u));
      std::memcpy(&f, &u, 4);
    } else {
      uint64_t u = 0;
      VRUN_RETURN_IF_ERROR(rr.fixed64(&u));
      std::memcpy(&f, &u, 8);
    }
    out->push_back(static_cast<double>(f));
    return Status::ok();
  };
  if (wire == kWire) return one(r);
  VRUN_RETURN_IF_ERROR(r.expect(wire, 2, "floats"));
  const uint8_t* p = nullptr;
  size_t n = 0;
  VRUN_RETURN_IF_ERROR(r.bytes(&p, &n));
  if (n % sizeof(F)) return r.fail("a packed float field's size is not a multiple of its element");
  Reader sub(p, n, r.what());
  while (!sub.done()) VRUN_RETURN_IF_ERROR(one(sub));
  return Status::ok();
}

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);
  else if (exp == 31) v = mant ? std::nan("") : INFINITY;
  else v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}

Status parse_tensor(const uint8_t* d, size_t n, const std::string& what, Tensor* t) {
  Reader r(d, n, what);
  const uint8_t* raw = nullptr;
  size_t raw_n = 0;
  bool has_raw = false, external = false;
  std::vector<int64_t> ints;
  std::vector<double> reals;
  while (!r.done()) {
    int f = 0, w = 0;
    VRUN_RETURN_IF_ERROR(r.tag(&f, &w));
    uint64_t v = 0;
    switch (f) {
      case 1: VRUN_RETURN_IF_ERROR(read_ints(r, w, &t->dims)); break;
      case 2:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "data_type"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        t->elem_type = static_cast<int32_t>(v);
        break;
      case 4: VRUN_RETURN_IF_ERROR(read_reals<float>(r, w, &reals)); break;
      case 5:
      case 7: VRUN_RETURN_IF_ERROR(read_ints(r, w, &ints)); break;
      case 8: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name")); VRUN_RETURN_IF_ERROR(r.str(&t->name)); break;
      case 9:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "raw_data"));
        VRUN_RETURN_IF_ERROR(r.bytes(&raw, &raw_n));
        has_raw = true;
        break;
      case 10: VRUN_RETURN_IF_ERROR(read_reals<double>(r, w, &reals)); break;
      case 13: VRUN_RETURN_IF_ERROR(r.skip(w)); external = true; break;
      case 14:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "data_location"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        if (v == 1) external = true;
        break;
      default: VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  const std::string who = what + " tensor '" + t->name + "'";
  if (external)
    return err(ErrorCode::kUnsupported, who,
               ": its data is stored in an external file; vrun reads self-contained .onnx files only "
               "(save the model with all tensors inside it)");
  int64_t numel = 1;
  for (int64_t dim : t->dims) {
    if (dim < 0) return err(ErrorCode::kInvalidProgram, who, ": negative dim ", dim);
    if (dim > 0 && numel > kMaxElements / dim) return err(ErrorCode::kInvalidProgram, who, ": too many elements");
    numel *= dim;
  }
  const auto et = static_cast<ElemType>(t->elem_type);
  size_t esize = 0;
  switch (et) {
    case ElemType::kFloat: case ElemType::kInt32: esize = 4; break;
    case ElemType::kInt64: case ElemType::kDouble: esize = 8; break;
    case ElemType::kUint8: case ElemType::kInt8: case ElemType::kBool: esize = 1; break;
    case ElemType::kFloat16: esize = 2; break;
    default:
      return err(ErrorCode::kUnsupported, who, ": element type ", elem_type_name(t->elem_type), " is not supported");
  }
  t->values.clear();
  if (has_raw) {
    if (raw_n != static_cast<size_t>(numel) * esize)
      return err(ErrorCode::kInvalidProgram, who, ": raw_data holds ", raw_n, " bytes, dims need ",
                 static_cast<size_t>(numel) * esize);
    t->values.resize(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) {
      const uint8_t* p = raw + static_cast<size_t>(i) * esize;
      double v = 0;
      switch (et) {
        case ElemType::kFloat: { float f; std::memcpy(&f, p, 4); v = f; break; }
        case ElemType::kDouble: { std::memcpy(&v, p, 8); break; }
        case ElemType::kInt32: { int32_t x; std::memcpy(&x, p, 4); v = x; break; }
        case ElemType::kInt64: { int64_t x; std::memcpy(&x, p, 8); v = static_cast<double>(x); break; }
        case ElemType::kUint8: case ElemType::kBool: v = *p; break;
        case ElemType::kInt8: v = static_cast<int8_t>(*p); break;
        case ElemType::kFloat16: { uint16_t h; std::memcpy(&h, p, 2); v = half_to_double(h); break; }
        default: break;
      }
      t->values[static_cast<size_t>(i)] = v;
    }
  } else if (!reals.empty()) {
    t->values = std::move(reals);
  } else if (et == ElemType::kFloat16) {
    for (int64_t x : ints) t->values.push_back(half_to_double(static_cast<uint16_t>(x)));
  } else {
    for (int64_t x : ints) t->values.push_back(static_cast<double>(x));
  }
  if (t->values.size() != static_cast<size_t>(numel))
    return err(ErrorCode::kInvalidProgram, who, ": holds ", t->values.size(), " values, dims ask for ", numel);
  return Status::ok();
}

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
      case 1: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name")); VRUN_RETURN_IF_ERROR(r.str(&a->name)); break;
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
      case 4: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "s")); VRUN_RETURN_IF_ERROR(r.str(&a->s)); break;
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
        VRUN_RETURN_IF_ERROR(parse_graph(p, len, what + " subgraph '" + a->name + "'", depth + 1, a->g.get()));
        break;
      case 7: VRUN_RETURN_IF_ERROR(read_reals<float>(r, w, &a->floats)); break;
      case 8: VRUN_RETURN_IF_ERROR(read_ints(r, w, &a->ints)); break;
      case 20:
        VRUN_RETURN_IF_ERROR(r.expect(w, 0, "type"));
        VRUN_RETURN_IF_ERROR(r.varint(&v));
        a->type = static_cast<Attribute::Type>(v);
        break;
      default: VRUN_RETURN_IF_ERROR(r.skip(w));
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
      case 1: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "input")); VRUN_RETURN_IF_ERROR(r.str(&s)); node->inputs.push_back(s); break;
      case 2: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "output")); VRUN_RETURN_IF_ERROR(r.str(&s)); node->outputs.push_back(s); break;
      case 3: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name")); VRUN_RETURN_IF_ERROR(r.str(&node->name)); break;
      case 4: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "op_type")); VRUN_RETURN_IF_ERROR(r.str(&node->op_type)); break;
      case 5:
        VRUN_RETURN_IF_ERROR(r.expect(w, 2, "attribute"));
        VRUN_RETURN_IF_ERROR(r.bytes(&p, &len));
        attrs.emplace_back(p, len);
        break;
      case 7: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "domain")); VRUN_RETURN_IF_ERROR(r.str(&node->domain)); break;
      default: VRUN_RETURN_IF_ERROR(r.skip(w));
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
      case 2: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "name")); VRUN_RETURN_IF_ERROR(r.str(&g->name)); break;
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
      default: VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  return Status::ok();
}

}  // namespace

const char* elem_type_name(int32_t t) {
  static const char* names[] = {"undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                "string", "bool", "float16", "double", "uint32", "uint64", "complex64",
                                "complex128", "bfloat16"};
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
      case 2: VRUN_RETURN_IF_ERROR(r.expect(w, 2, "producer_name")); VRUN_RETURN_IF_ERROR(r.str(&m.producer)); break;
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
      default: VRUN_RETURN_IF_ERROR(r.skip(w));
    }
  }
  if (!has_graph || m.ir_version == 0)
    return err(ErrorCode::kInvalidProgram, name, ": not an ONNX model (no ", has_graph ? "ir_version" : "graph", ")");
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
