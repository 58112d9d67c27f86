// Program -> .vrp bytes: header, flatbuffer, page-aligned constant segment.
#include <cstdio>
#include <cstring>
#include <fstream>

#include "runtime/base/mapped_file.h"
#include "runtime/program.h"
#include "runtime/program_file.h"
#include "runtime/schema/program_generated.h"

namespace vrun {

namespace {

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

Offset<fb::Expr> write_expr(FlatBufferBuilder& b, const SymExpr& e) {
  std::vector<int32_t> syms;
  std::vector<int64_t> coefs;
  for (const auto& [s, c] : e.terms) {
    syms.push_back(s);
    coefs.push_back(c);
  }
  return fb::CreateExprDirect(b, e.constant, &syms, &coefs);
}

Offset<fb::Method> write_method(FlatBufferBuilder& b, const MethodDef& m) {
  std::vector<Offset<fb::Symbol>> symbols;
  for (const auto& s : m.symbols) symbols.push_back(fb::CreateSymbolDirect(b, s.name.c_str(), s.min, s.max));
  std::vector<Offset<fb::Value>> values;
  for (const auto& v : m.values) {
    std::vector<Offset<fb::Dim>> dims;
    for (const auto& d : v.dims)
      dims.push_back(fb::CreateDim(b, d.size, d.expr ? write_expr(b, *d.expr) : 0, d.derived));
    Offset<fb::View> view = 0;
    if (v.view_base >= 0) view = fb::CreateViewDirect(b, v.view_base, v.view_offset, &v.view_strides);
    values.push_back(fb::CreateValueDirect(b, v.name.c_str(), static_cast<uint8_t>(v.dtype), &dims,
                                           static_cast<fb::ValueKind>(v.kind), v.index, v.arena_offset,
                                           v.arena_size, view));
  }
  std::vector<Offset<fb::Node>> nodes;
  for (const auto& n : m.nodes) {
    const OpSchema& sch = op_schema(n.op);
    std::vector<Offset<fb::Attr>> attrs;
    for (int k = 0; k < n.attrs.values.size(); ++k) {
      const AttrValue& a = n.attrs.values.at(k);
      const AttrSpec& spec = sch.attrs[k];
      // Attributes at their default are left out; the loader fills defaults from ops.def.
      auto ie = n.attrs.int_exprs.find(k);
      auto ies = n.attrs.ints_exprs.find(k);
      const bool is_default = spec.has_default && ie == n.attrs.int_exprs.end() && ies == n.attrs.ints_exprs.end() &&
                              a.i == spec.i && (a.f == spec.f || (a.f != a.f && spec.f != spec.f)) && a.s == spec.s &&
                              a.ints == spec.ints && a.floats == spec.floats;
      if (is_default || !a.set) continue;
      Offset<fb::Expr> i_expr = ie != n.attrs.int_exprs.end() ? write_expr(b, ie->second) : 0;
      Offset<flatbuffers::Vector<Offset<fb::Expr>>> ints_expr = 0;
      if (ies != n.attrs.ints_exprs.end()) {
        std::vector<Offset<fb::Expr>> es;
        for (const auto& e : ies->second) es.push_back(write_expr(b, e));
        ints_expr = b.CreateVector(es);
      }
      auto name = b.CreateString(spec.name);
      auto str = b.CreateString(a.s);
      auto ints = b.CreateVector(a.ints);
      auto floats = b.CreateVector(a.floats);
      attrs.push_back(fb::CreateAttr(b, name, a.i, a.f, str, ints, floats, i_expr, ints_expr));
    }
    std::vector<int32_t> ins(n.inputs.begin(), n.inputs.end()), outs(n.outputs.begin(), n.outputs.end());
    nodes.push_back(fb::CreateNodeDirect(b, sch.name.c_str(), &ins, &outs, &attrs, n.name.c_str()));
  }
  std::vector<int32_t> ins(m.inputs.begin(), m.inputs.end()), outs(m.outputs.begin(), m.outputs.end());
  return fb::CreateMethodDirect(b, m.name.c_str(), &symbols, &values, &ins, &outs, &nodes, m.arena_size);
}

// The file's layout: its head (header and flatbuffer, then zeros up to the constant segment)
// and each constant's offset in the segment.
struct Layout {
  std::vector<uint8_t> head;
  std::vector<uint64_t> offsets;
  uint64_t segment_size = 0;
};

Layout layout(const Program& p) {
  FlatBufferBuilder b(1 << 16);
  std::vector<Offset<fb::Method>> methods;
  for (const auto& m : p.methods) methods.push_back(write_method(b, m));
  std::vector<Offset<fb::Constant>> constants;
  uint64_t seg = 0;
  std::vector<uint64_t> offsets;
  for (const auto& c : p.constants) {
    seg = align_up(seg, kConstantAlignment);
    offsets.push_back(seg);
    const std::vector<int64_t> shape = c.shape.vec();
    constants.push_back(fb::CreateConstantDirect(b, c.name.c_str(), static_cast<uint8_t>(c.dtype), &shape, seg, c.size));
    seg += c.size;
  }
  std::vector<Offset<fb::State>> states;
  for (const auto& s : p.states) {
    const std::vector<int64_t> shape = s.shape.vec();
    states.push_back(fb::CreateStateDirect(b, s.name.c_str(), static_cast<uint8_t>(s.dtype), &shape));
  }
  std::vector<Offset<fb::Meta>> meta;
  for (const auto& [key, v] : p.metadata) {
    Offset<flatbuffers::Vector<uint8_t>> bytes = 0;
    if (v.type == MetaType::kBytes) bytes = b.CreateVector(reinterpret_cast<const uint8_t*>(v.s.data()), v.s.size());
    Offset<flatbuffers::String> s = v.type == MetaType::kString ? b.CreateString(v.s) : 0;
    auto ints = v.type == MetaType::kInts ? b.CreateVector(v.ints) : 0;
    auto strings = v.type == MetaType::kStrings ? b.CreateVectorOfStrings(v.strings) : 0;
    auto floats = v.type == MetaType::kFloats ? b.CreateVector(v.floats) : 0;
    meta.push_back(fb::CreateMeta(b, b.CreateString(key), static_cast<fb::MetaType>(v.type), s, v.i, v.f, bytes, ints,
                                  strings, floats));
  }
  auto root = fb::CreateProgramDirect(b, kProgramFormatVersion, &methods, &constants, &states, &meta);
  b.Finish(root, fb::ProgramIdentifier());

  ProgramFileHeader h{};
  std::memcpy(h.magic, kProgramMagic, sizeof(h.magic));
  h.version = kProgramFormatVersion;
  h.flatbuffer_offset = sizeof(ProgramFileHeader);
  h.flatbuffer_size = b.GetSize();
  h.segment_offset = align_up(h.flatbuffer_offset + h.flatbuffer_size, kSegmentAlignment);
  h.segment_size = seg;
  Layout l;
  l.head.assign(h.segment_offset, 0);
  std::memcpy(l.head.data(), &h, sizeof(h));
  std::memcpy(l.head.data() + h.flatbuffer_offset, b.GetBufferPointer(), b.GetSize());
  l.offsets = std::move(offsets);
  l.segment_size = seg;
  return l;
}

}  // namespace

Result<std::vector<uint8_t>> serialize_program(const Program& p, bool verify) {
  if (verify) VRUN_RETURN_IF_ERROR(verify_program(p).with_context("refusing to write an invalid program"));
  const Layout l = layout(p);
  std::vector<uint8_t> out(l.head.size() + l.segment_size, 0);
  std::memcpy(out.data(), l.head.data(), l.head.size());
  for (size_t i = 0; i < p.constants.size(); ++i) p.constants[i].copy_to(out.data() + l.head.size() + l.offsets[i]);
  return out;
}

// Streamed: the constants go from where they lie (a mapped checkpoint, pieces) to the file
// without a copy of the whole program in memory.
Status write_program(const Program& p, const std::string& path) {
  VRUN_RETURN_IF_ERROR(verify_program(p).with_context("refusing to write an invalid program"));
  const Layout l = layout(p);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return err(ErrorCode::kIo, "cannot open ", tmp, " for writing");
    auto write = [&](const void* bytes, uint64_t n) {
      f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
    };
    write(l.head.data(), l.head.size());
    const std::vector<uint8_t> zeros(kConstantAlignment, 0);
    uint64_t at = 0;
    for (size_t i = 0; i < p.constants.size() && f; ++i) {
      write(zeros.data(), l.offsets[i] - at);
      p.constants[i].for_each_run([&](const uint8_t* run, uint64_t n) {
        write(run, n);
        MappedFile::release_pages(run, static_cast<size_t>(n));  // written: out of resident memory
      });
      at = l.offsets[i] + p.constants[i].size;
    }
    if (f) write(zeros.data(), l.segment_size - at);
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return err(ErrorCode::kIo, "writing ", tmp, " failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return err(ErrorCode::kIo, "cannot rename ", tmp, " to ", path);
  }
  return Status::ok();
}

}  // namespace vrun
