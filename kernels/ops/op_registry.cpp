#include "kernels/ops/op_registry.h"

#include "runtime/base/strings.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace vrun {

namespace {

struct RawOp {
  const char* name;
  OpFamily family;
  const char* inputs;
  const char* outputs;
  const char* attrs;
};

constexpr RawOp kRawOps[] = {
#define VRUN_OP(name, family, inputs, outputs, attrs) {#name, OpFamily::family, inputs, outputs, attrs},
#include "kernels/ops/ops.def"
#undef VRUN_OP
};

double parse_double(const std::string& s) {
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  return std::strtod(s.c_str(), nullptr);
}

// ops.def is compiled in; a malformed entry is a programming error caught by the first test.
AttrSpec parse_attr(const std::string& text, const char* op) {
  AttrSpec a;
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw std::logic_error(std::string("ops.def: attribute without type in ") + op);
  a.name = text.substr(0, colon);
  std::string rest = text.substr(colon + 1);
  std::string type = rest, def;
  const auto eq = rest.find('=');
  if (eq != std::string::npos) {
    type = rest.substr(0, eq);
    def = rest.substr(eq + 1);
    a.has_default = true;
  }
  if (type == "int") a.type = AttrType::kInt;
  else if (type == "float") a.type = AttrType::kFloat;
  else if (type == "str") a.type = AttrType::kStr;
  else if (type == "ints") a.type = AttrType::kInts;
  else if (type == "floats") a.type = AttrType::kFloats;
  else throw std::logic_error(std::string("ops.def: unknown attribute type ") + type + " in " + op);
  if (a.has_default) {
    switch (a.type) {
      case AttrType::kInt: a.i = std::strtoll(def.c_str(), nullptr, 10); break;
      case AttrType::kFloat: a.f = parse_double(def); break;
      case AttrType::kStr: a.s = def; break;
      case AttrType::kInts:
        for (const auto& p : split(def, ' '))
          if (!p.empty()) a.ints.push_back(std::strtoll(p.c_str(), nullptr, 10));
        break;
      case AttrType::kFloats:
        for (const auto& p : split(def, ' '))
          if (!p.empty()) a.floats.push_back(parse_double(p));
        break;
    }
  }
  return a;
}

std::vector<OpSchema> build_schemas() {
  std::vector<OpSchema> out;
  for (int k = 0; k < kNumOps; ++k) {
    const RawOp& r = kRawOps[k];
    OpSchema s;
    s.kind = static_cast<OpKind>(k);
    s.name = r.name;
    s.family = r.family;
    for (auto in : split(r.inputs, ',')) {
      InputSpec spec;
      while (!in.empty() && (in.back() == '?' || in.back() == '*' || in.back() == '!')) {
        if (in.back() == '?') spec.optional = true;
        if (in.back() == '*') spec.variadic = true;
        if (in.back() == '!') spec.contiguous = true;
        in.pop_back();
      }
      spec.name = in;
      s.inputs.push_back(spec);
    }
    for (auto o : split(r.outputs, ',')) {
      if (!o.empty() && o.back() == '*') {
        s.variadic_outputs = true;
        o.pop_back();
      }
      s.outputs.push_back(o);
    }
    for (const auto& a : split(r.attrs, ',')) s.attrs.push_back(parse_attr(a, r.name));
    out.push_back(std::move(s));
  }
  return out;
}

const std::vector<OpSchema>& schemas() {
  static const std::vector<OpSchema> kSchemas = build_schemas();
  return kSchemas;
}

}  // namespace

int OpSchema::min_inputs() const {
  int n = 0;
  for (const auto& in : inputs)
    if (!in.optional) ++n;
  return n;
}

int OpSchema::max_inputs() const {
  if (!inputs.empty() && inputs.back().variadic) return -1;
  return static_cast<int>(inputs.size());
}

const AttrSpec* OpSchema::attr(std::string_view n) const {
  for (const auto& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

int OpSchema::attr_index(std::string_view n) const {
  for (size_t i = 0; i < attrs.size(); ++i)
    if (attrs[i].name == n) return static_cast<int>(i);
  return -1;
}

const OpSchema& op_schema(OpKind kind) { return schemas()[static_cast<size_t>(kind)]; }

std::optional<OpKind> op_from_name(std::string_view name) {
  for (const auto& s : schemas())
    if (s.name == name) return s.kind;
  return std::nullopt;
}

const char* attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::kInt: return "int";
    case AttrType::kFloat: return "float";
    case AttrType::kStr: return "str";
    case AttrType::kInts: return "ints";
    case AttrType::kFloats: return "floats";
  }
  return "?";
}

const char* op_family_name(OpFamily f) {
  switch (f) {
    case OpFamily::unary: return "unary";
    case OpFamily::binary: return "binary";
    case OpFamily::reduce: return "reduce";
    case OpFamily::norm: return "norm";
    case OpFamily::linalg: return "linalg";
    case OpFamily::attention: return "attention";
    case OpFamily::conv: return "conv";
    case OpFamily::view: return "view";
    case OpFamily::data: return "data";
    case OpFamily::rnn: return "rnn";
  }
  return "?";
}

}  // namespace vrun
