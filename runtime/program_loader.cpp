// .vrp bytes -> Program: header checks, the flatbuffers verifier, conversion with every code and
// reference checked, then verify_program. Nothing is trusted before it is checked.
#include <cerrno>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/base/mapped_file.h"
#include "runtime/program.h"
#include "runtime/program_file.h"
#include "runtime/schema/program_generated.h"

namespace vrun {

namespace {

Status bad(const std::string& where, const auto&... parts) {
  return err(ErrorCode::kInvalidProgram, where, ": ", parts...);
}


Result<DType> read_dtype(const std::string& where, uint8_t code) {
  const DTypeInfo* info = dtype_info_from_code(code);
  if (!info) return bad(where, "unknown dtype code ", int(code));
  return static_cast<DType>(code);
}

// The flatbuffers verifier checks a vector's length field for alignment, not its elements: a
// crafted file can place a [long] or [double] vector four bytes off, and reading it through Get()
// or its iterators is a misaligned load (undefined). 64-bit elements are read byte-wise.
template <typename T>
T element(const flatbuffers::Vector<T>* v, size_t i) {
  static_assert(std::is_arithmetic_v<T>);
  T x;
  std::memcpy(&x, v->Data() + i * sizeof(T), sizeof(T));
  return flatbuffers::EndianScalar(x);
}
template <typename T>
std::vector<T> elements(const flatbuffers::Vector<T>* v) {
  std::vector<T> out(v->size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = element(v, i);
  return out;
}

Result<Shape> read_shape(const std::string& where, const flatbuffers::Vector<int64_t>* v) {
  Shape s;
  if (!v) return s;
  if (v->size() > static_cast<size_t>(kMaxRank)) return bad(where, "rank ", v->size(), " exceeds ", kMaxRank);
  s.rank = static_cast<int>(v->size());
  for (int i = 0; i < s.rank; ++i) s[i] = element(v, static_cast<size_t>(i));
  return s;
}

SymExpr read_expr(const fb::Expr* e) {
  SymExpr r(e->constant());
  const size_t n = std::min(e->sym() ? e->sym()->size() : 0, e->coef() ? e->coef()->size() : 0);
  for (size_t i = 0; i < n; ++i)
    if (element(e->coef(), i)) r.terms.push_back({element(e->sym(), i), element(e->coef(), i)});
  return r;
}

Status read_attrs(const std::string& where, const fb::Node* n, NodeDef* node) {
  const OpSchema& sch = op_schema(node->op);
  if (!n->attrs()) return Status::ok();
  for (const fb::Attr* a : *n->attrs()) {
    const int k = sch.attr_index(a->name()->string_view());
    if (k < 0) return bad(where, "op ", sch.name, " has no attribute '", a->name()->str(), "'");
    AttrValue& v = node->attrs.values.at(k);
    v.set = true;
    switch (sch.attrs[k].type) {
      case AttrType::kInt:
        v.i = a->i();
        if (a->i_expr()) node->attrs.int_exprs[k] = read_expr(a->i_expr());
        break;
      case AttrType::kFloat: v.f = a->f(); break;
      case AttrType::kStr: v.s = a->s() ? a->s()->str() : ""; break;
      case AttrType::kInts:
        v.ints.clear();
        if (a->ints()) v.ints = elements(a->ints());
        if (a->ints_expr()) {
          if (a->ints_expr()->size() != v.ints.size())
            return bad(where, "attribute '", sch.attrs[k].name, "' has ", v.ints.size(), " values but ",
                       a->ints_expr()->size(), " expressions");
          auto& es = node->attrs.ints_exprs[k];
          for (const fb::Expr* e : *a->ints_expr()) es.push_back(read_expr(e));
        }
        break;
      case AttrType::kFloats:
        v.floats.clear();
        if (a->floats()) v.floats = elements(a->floats());
        break;
    }
  }
  return Status::ok();
}

Status read_method(const fb::Method* fm, MethodDef* m) {
  m->name = fm->name()->str();
  const std::string mw = "method '" + m->name + "'";
  if (fm->symbols())
    for (const fb::Symbol* s : *fm->symbols()) m->symbols.push_back({s->name()->str(), s->min(), s->max()});
  if (fm->values()) {
    for (size_t i = 0; i < fm->values()->size(); ++i) {
      const fb::Value* fv = fm->values()->Get(i);
      const std::string w = mw + " value " + std::to_string(i);
      ValueDef v;
      v.name = fv->name() ? fv->name()->str() : "";
      VRUN_ASSIGN_OR_RETURN(v.dtype, read_dtype(w, fv->dtype()));
      if (fv->shape()) {
        if (fv->shape()->size() > static_cast<size_t>(kMaxRank)) return bad(w, "rank ", fv->shape()->size(), " exceeds ", kMaxRank);
        for (const fb::Dim* d : *fv->shape()) {
          DimDef dd;
          dd.size = d->size();
          if (d->expr()) dd.expr = read_expr(d->expr());
          dd.derived = d->derived();
          v.dims.push_back(dd);
        }
      }
      const int kind = static_cast<int>(fv->kind());
      if (kind < 0 || kind > 3) return bad(w, "unknown value kind ", kind);
      v.kind = static_cast<ValueKind>(kind);
      v.index = fv->index();
      v.arena_offset = fv->arena_offset();
      v.arena_size = fv->arena_size();
      if (fv->view()) {
        v.view_base = fv->view()->base();
        v.view_offset = fv->view()->offset();
        if (fv->view()->strides()) v.view_strides = elements(fv->view()->strides());
      }
      m->values.push_back(std::move(v));
    }
  }
  if (fm->inputs()) m->inputs.assign(fm->inputs()->begin(), fm->inputs()->end());
  if (fm->outputs()) m->outputs.assign(fm->outputs()->begin(), fm->outputs()->end());
  if (fm->nodes()) {
    for (size_t i = 0; i < fm->nodes()->size(); ++i) {
      const fb::Node* fn = fm->nodes()->Get(i);
      const std::string w = mw + " node " + std::to_string(i);
      auto op = op_from_name(fn->op()->string_view());
      if (!op) return bad(w, "unknown op '", fn->op()->str(), "' (this vrun knows the ops in kernels/ops.def)");
      NodeDef node(*op);
      node.name = fn->name() ? fn->name()->str() : "";
      if (fn->inputs()) node.inputs.assign(fn->inputs()->begin(), fn->inputs()->end());
      if (fn->outputs()) node.outputs.assign(fn->outputs()->begin(), fn->outputs()->end());
      VRUN_RETURN_IF_ERROR(read_attrs(w, fn, &node));
      m->nodes.push_back(std::move(node));
    }
  }
  m->arena_size = fm->arena_size();
  return Status::ok();
}

// keep owns the bytes [data, data + size).
Result<std::shared_ptr<Program>> parse(std::shared_ptr<const void> map, const uint8_t* data, uint64_t size,
                                       const std::string& name) {
  if (size < sizeof(ProgramFileHeader)) return bad(name, "file is ", size, " bytes, too short for a vrun program");
  ProgramFileHeader h;
  std::memcpy(&h, data, sizeof(h));
  if (std::memcmp(h.magic, kProgramMagic, sizeof(h.magic)) != 0) return bad(name, "not a vrun program (bad magic)");
  if (h.version != kProgramFormatVersion)
    return bad(name, "format version ", h.version, ", this vrun reads version ", kProgramFormatVersion,
               " (re-export the model)");
  if (h.flatbuffer_offset < sizeof(h) || h.flatbuffer_offset > size || h.flatbuffer_size > size - h.flatbuffer_offset)
    return bad(name, "program table [", h.flatbuffer_offset, ", +", h.flatbuffer_size, ") lies outside the ", size,
               "-byte file (truncated?)");
  if (h.segment_offset % kSegmentAlignment || h.segment_offset < h.flatbuffer_offset + h.flatbuffer_size ||
      h.segment_offset > size || h.segment_size > size - h.segment_offset)
    return bad(name, "constant segment [", h.segment_offset, ", +", h.segment_size, ") is misplaced in the ", size,
               "-byte file (truncated?)");
  if (h.flatbuffer_offset % 8) return bad(name, "program table offset ", h.flatbuffer_offset, " is not 8-byte aligned");
  const uint8_t* fbuf = data + h.flatbuffer_offset;
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 32;
  opts.max_tables = 1u << 26;
  flatbuffers::Verifier verifier(fbuf, h.flatbuffer_size, opts);
  if (!fb::VerifyProgramBuffer(verifier)) return bad(name, "program table failed structural verification (corrupt file)");
  const fb::Program* fp = fb::GetProgram(fbuf);

  auto p = std::make_shared<Program>();
  p->mapping = map;
  p->source = name;
  p->version = fp->version();
  if (p->version != kProgramFormatVersion) return bad(name, "table version ", p->version, " differs from the header's");
  const uint8_t* seg = data + h.segment_offset;
  if (fp->constants()) {
    for (size_t i = 0; i < fp->constants()->size(); ++i) {
      const fb::Constant* fc = fp->constants()->Get(i);
      const std::string w = name + ": constant " + std::to_string(i) + " '" + fc->name()->str() + "'";
      ConstantDef c;
      c.name = fc->name()->str();
      VRUN_ASSIGN_OR_RETURN(c.dtype, read_dtype(w, fc->dtype()));
      VRUN_ASSIGN_OR_RETURN(c.shape, read_shape(w, fc->shape()));
      if (fc->offset() % kConstantAlignment) return bad(w, "offset ", fc->offset(), " is not ", kConstantAlignment, "-byte aligned");
      if (fc->offset() > h.segment_size || fc->size() > h.segment_size - fc->offset())
        return bad(w, "bytes [", fc->offset(), ", +", fc->size(), ") lie outside the ", h.segment_size, "-byte segment");
      c.data = seg + fc->offset();
      c.size = fc->size();
      c.keep = map;
      p->constants.push_back(std::move(c));
    }
  }
  if (fp->states()) {
    for (size_t i = 0; i < fp->states()->size(); ++i) {
      const fb::State* fs = fp->states()->Get(i);
      const std::string w = name + ": state " + std::to_string(i);
      StateDef s;
      s.name = fs->name()->str();
      VRUN_ASSIGN_OR_RETURN(s.dtype, read_dtype(w, fs->dtype()));
      VRUN_ASSIGN_OR_RETURN(s.shape, read_shape(w, fs->shape()));
      p->states.push_back(std::move(s));
    }
  }
  if (fp->metadata()) {
    for (const fb::Meta* fm : *fp->metadata()) {
      MetaValue v;
      const int t = static_cast<int>(fm->type());
      if (t < 0 || t > 6) return bad(name, "metadata '", fm->key()->str(), "' has unknown type ", t);
      v.type = static_cast<MetaType>(t);
      if (fm->s()) v.s = fm->s()->str();
      if (v.type == MetaType::kBytes && fm->bytes()) v.s.assign(reinterpret_cast<const char*>(fm->bytes()->data()), fm->bytes()->size());
      v.i = fm->i();
      v.f = fm->f();
      if (fm->ints()) v.ints = elements(fm->ints());
      if (fm->floats()) v.floats = elements(fm->floats());
      if (fm->strings())
        for (const auto* s : *fm->strings()) v.strings.push_back(s->str());
      if (!p->metadata.emplace(fm->key()->str(), std::move(v)).second)
        return bad(name, "metadata key '", fm->key()->str(), "' appears twice");
    }
  }
  if (fp->methods()) {
    for (const fb::Method* fm : *fp->methods()) {
      MethodDef m;
      VRUN_RETURN_IF_ERROR(read_method(fm, &m).with_context(name));
      p->methods.push_back(std::move(m));
    }
  }
  VRUN_RETURN_IF_ERROR(verify_program(*p).with_context(name));
  return p;
}

}  // namespace

Result<std::shared_ptr<Program>> load_program(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto map, MappedFile::open(path));
  return parse(map, map->data(), map->size(), path);
}

Result<std::shared_ptr<Program>> load_program_from_memory(const uint8_t* data, size_t size, const std::string& name) {
  // A private copy: the caller's buffer need not outlive the program.
  auto copy = std::make_shared<std::vector<uint8_t>>(data, data + size);
  return parse(copy, copy->data(), copy->size(), name);
}

}  // namespace vrun
