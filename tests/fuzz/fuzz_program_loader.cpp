// libFuzzer target for the program loader: any byte string must load cleanly or be refused
// with a message; a program that loads is also run once on a small input.
#include <cstdint>
#include <cstring>

#include "runtime/executor.h"
#include "runtime/program.h"
#include "tests/fuzz/program_runs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto p = vrun::load_program_from_memory(data, size, "fuzz");
  if (!p.is_ok()) {
    if (p.status().message().empty()) __builtin_trap();
    return 0;
  }
  auto ex = vrun::Executor::create(*p, {vrun::BackendKind::kCpu, 1});
  if (!ex.is_ok()) return 0;
  (void)vrun::fuzz::run_token_methods(**ex, **p);
  return 0;
}
