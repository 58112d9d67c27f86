#include "runtime/program.h"

#include <cstring>
#include <utility>

namespace vrun {

const char* value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::kIntermediate: return "intermediate";
    case ValueKind::kInput: return "input";
    case ValueKind::kConstant: return "constant";
    case ValueKind::kState: return "state";
  }
  return "?";
}

Shape ValueDef::max_shape() const {
  Shape s;
  s.rank = static_cast<int>(dims.size());
  for (int i = 0; i < s.rank && i < kMaxRank; ++i) s[i] = dims[i].size;
  return s;
}

Attrs AttrTemplate::resolve(const std::vector<int64_t>& symbol_values) const {
  Attrs a = values;
  for (const auto& [k, e] : int_exprs) a.at(k).i = e.eval(symbol_values);
  for (const auto& [k, es] : ints_exprs) {
    auto& v = a.at(k).ints;
    v.resize(es.size());
    for (size_t j = 0; j < es.size(); ++j) v[j] = es[j].eval(symbol_values);
  }
  return a;
}

std::vector<std::string> MethodDef::symbol_names() const {
  std::vector<std::string> n;
  for (const auto& s : symbols) n.push_back(s.name);
  return n;
}

int MethodDef::symbol_index(const std::string& n) const {
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].name == n) return static_cast<int>(i);
  return -1;
}

namespace {
// A MetaValue of `type` whose `field` holds v.
template <typename T>
MetaValue meta_value(MetaType type, T MetaValue::*field, T v) {
  MetaValue m;
  m.type = type;
  m.*field = std::move(v);
  return m;
}
}  // namespace

MetaValue MetaValue::str(std::string v) { return meta_value(MetaType::kString, &MetaValue::s, std::move(v)); }
MetaValue MetaValue::integer(int64_t v) { return meta_value(MetaType::kInt, &MetaValue::i, v); }
MetaValue MetaValue::real(double v) { return meta_value(MetaType::kFloat, &MetaValue::f, v); }
MetaValue MetaValue::bytes(std::string v) { return meta_value(MetaType::kBytes, &MetaValue::s, std::move(v)); }
MetaValue MetaValue::int_list(std::vector<int64_t> v) { return meta_value(MetaType::kInts, &MetaValue::ints, std::move(v)); }
MetaValue MetaValue::string_list(std::vector<std::string> v) {
  return meta_value(MetaType::kStrings, &MetaValue::strings, std::move(v));
}
MetaValue MetaValue::float_list(std::vector<double> v) {
  return meta_value(MetaType::kFloats, &MetaValue::floats, std::move(v));
}

const MethodDef* Program::method(const std::string& name) const {
  for (const auto& m : methods)
    if (m.name == name) return &m;
  return nullptr;
}

const MetaValue* Program::meta(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

void ConstantDef::copy_to(uint8_t* dst) const {
  for_each_run([&](const uint8_t* run, uint64_t n) {
    std::memcpy(dst, run, static_cast<size_t>(n));
    dst += n;
  });
}

uint64_t Program::constant_bytes() const {
  uint64_t n = 0;
  for (const auto& c : constants) n += c.size;
  return n;
}

}  // namespace vrun
