// libFuzzer target for the program loader: any byte string must load cleanly or be refused
// with a message; a program that loads is also run once on a small input.
#include <cstdint>
#include <cstring>

#include "runtime/executor.h"
#include "runtime/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = vrun::load_program_from_memory(data, size, "fuzz");
  if (!p.is_ok()) {
    if (p.status().message().empty()) __builtin_trap();
    return 0;
  }
  auto ex = vrun::Executor::create(*p, {vrun::BackendKind::kCpu, 1});
  if (!ex.is_ok()) return 0;
  for (const auto& m : (*p)->methods) {
    if (m.inputs.size() != 1 || m.values[m.inputs[0]].dtype != vrun::DType::i32) continue;
    int32_t toks[2] = {1, 2};
    std::map<std::string, int64_t> syms;
    for (const auto& s : m.symbols)
      if (s.name != "seq") syms[s.name] = s.min;
    (void)(*ex)->run(m.name, {vrun::TensorView::dense(toks, vrun::DType::i32, {1, 2})}, syms);
  }
  return 0;
}
