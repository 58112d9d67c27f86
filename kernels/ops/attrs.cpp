#include "kernels/ops/attrs.h"

#include <cstdio>
#include <cstdlib>

namespace vrun {

Attrs::Attrs(OpKind op) : op_(op) {
  const OpSchema& sch = op_schema(op);
  values_.resize(sch.attrs.size());
  for (size_t k = 0; k < sch.attrs.size(); ++k) {
    const AttrSpec& a = sch.attrs[k];
    AttrValue& v = values_[k];
    static_cast<AttrData&>(v) = a;
    v.set = a.has_default;
  }
}

// Asking for an attribute an op does not have is a bug in vrun itself, not bad input.
[[noreturn]] static void attr_bug(OpKind op, std::string_view name, const char* what) {
  std::fprintf(stderr, "vrun internal error: op %s: attribute '%.*s' %s\n", op_name(op),
               static_cast<int>(name.size()), name.data(), what);
  std::abort();
}

const AttrValue& Attrs::get(std::string_view name, AttrType type) const {
  const OpSchema& sch = schema();
  const int k = sch.attr_index(name);
  if (k < 0) attr_bug(op_, name, "is not in ops.def");
  if (sch.attrs[k].type != type) attr_bug(op_, name, "read with the wrong type");
  return values_[k];
}

AttrValue& Attrs::mut(std::string_view name, AttrType type) {
  const AttrValue& v = get(name, type);
  AttrValue& m = const_cast<AttrValue&>(v);
  m.set = true;
  return m;
}

Attrs& Attrs::set_i(std::string_view name, int64_t v) {
  mut(name, AttrType::kInt).i = v;
  return *this;
}
Attrs& Attrs::set_f(std::string_view name, double v) {
  mut(name, AttrType::kFloat).f = v;
  return *this;
}
Attrs& Attrs::set_s(std::string_view name, std::string v) {
  mut(name, AttrType::kStr).s = std::move(v);
  return *this;
}
Attrs& Attrs::set_ints(std::string_view name, std::vector<int64_t> v) {
  mut(name, AttrType::kInts).ints = std::move(v);
  return *this;
}
Attrs& Attrs::set_floats(std::string_view name, std::vector<double> v) {
  mut(name, AttrType::kFloats).floats = std::move(v);
  return *this;
}

}  // namespace vrun
