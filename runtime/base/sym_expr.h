// Affine expressions over a method's symbols (seq, pos, frames, ...): constant + sum(coef * sym).
// Dims of values and int attributes (slice bounds, cache positions) use them, so one method
// serves every sequence length and cache position without being rebuilt.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vrun {

struct SymExpr {
  int64_t constant = 0;
  std::vector<std::pair<int, int64_t>> terms;  // (symbol index, coefficient), sorted by index, coef != 0

  SymExpr() = default;
  SymExpr(int64_t c) : constant(c) {}  // NOLINT(google-explicit-constructor): constants read naturally
  static SymExpr symbol(int index, int64_t coef = 1);

  bool is_constant() const { return terms.empty(); }
  int64_t eval(const std::vector<int64_t>& symbol_values) const;
  // "pos + seq", "2*frames - 1", "7"
  std::string str(const std::vector<std::string>& symbol_names) const;
  bool operator==(const SymExpr& o) const { return constant == o.constant && terms == o.terms; }

  friend SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator*(const SymExpr& a, int64_t k);
  friend SymExpr operator*(int64_t k, const SymExpr& a) { return a * k; }
};

}  // namespace vrun
