#include "runtime/base/sym_expr.h"

#include <cstdint>
#include <map>
#include <sstream>

namespace vrun {

SymExpr SymExpr::symbol(int index, int64_t coef) {
  SymExpr e;
  if (coef != 0) e.terms.push_back({index, coef});
  return e;
}

int64_t SymExpr::eval(const std::vector<int64_t>& v) const {
  // Saturating: a program's expression may come from an untrusted file, and a value past the
  // int64 range is then refused downstream as an impossible size rather than wrapping.
  const auto saturate = [](bool negative) { return negative ? INT64_MIN : INT64_MAX; };
  int64_t r = constant;
  for (const auto& [s, c] : terms) {
    const int64_t x = s >= 0 && static_cast<size_t>(s) < v.size() ? v[s] : 0;
    int64_t term = 0;
    if (__builtin_mul_overflow(c, x, &term)) term = saturate((c < 0) != (x < 0));
    if (__builtin_add_overflow(r, term, &r)) r = saturate(term < 0);
  }
  return r;
}

std::string SymExpr::str(const std::vector<std::string>& names) const {
  std::ostringstream os;
  bool first = true;
  for (const auto& [s, c] : terms) {
    const std::string name = s >= 0 && static_cast<size_t>(s) < names.size() ? names[s] : "s" + std::to_string(s);
    if (!first) os << (c < 0 ? " - " : " + ");
    else if (c < 0) os << "-";
    const int64_t a = c < 0 ? -c : c;
    if (a != 1) os << a << "*";
    os << name;
    first = false;
  }
  if (first) os << constant;
  else if (constant) os << (constant < 0 ? " - " : " + ") << (constant < 0 ? -constant : constant);
  return os.str();
}

static SymExpr combine(const SymExpr& a, const SymExpr& b, int64_t sign) {
  std::map<int, int64_t> m;
  for (const auto& [s, c] : a.terms) m[s] += c;
  for (const auto& [s, c] : b.terms) m[s] += sign * c;
  SymExpr r(a.constant + sign * b.constant);
  for (const auto& [s, c] : m)
    if (c) r.terms.push_back({s, c});
  return r;
}

SymExpr operator+(const SymExpr& a, const SymExpr& b) { return combine(a, b, 1); }
SymExpr operator-(const SymExpr& a, const SymExpr& b) { return combine(a, b, -1); }
SymExpr operator*(const SymExpr& a, int64_t k) {
  SymExpr r(a.constant * k);
  if (k)
    for (const auto& [s, c] : a.terms) r.terms.push_back({s, c * k});
  return r;
}

}  // namespace vrun
