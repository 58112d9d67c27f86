// What the program loader's fuzz target and its regression tests do with a program that loads:
// run each method whose one input is an i32 tensor once, on tokens {1, 2}, every symbol other
// than seq at its minimum.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "runtime/executor.h"
#include "runtime/program.h"

namespace vrun::fuzz {

// The messages of the runs that failed, one after another.
inline std::string run_token_methods(Executor& ex, const Program& p) {
  std::string refusals;
  for (const auto& m : p.methods) {
    if (m.inputs.size() != 1 || m.values[m.inputs[0]].dtype != DType::i32) continue;
    int32_t toks[2] = {1, 2};
    std::map<std::string, int64_t> syms;
    for (const auto& s : m.symbols)
      if (s.name != "seq") syms[s.name] = s.min;
    auto r = ex.run(m.name, {TensorView::dense(toks, DType::i32, {1, 2})}, syms);
    if (!r.is_ok()) refusals += r.status().message();
  }
  return refusals;
}

}  // namespace vrun::fuzz
