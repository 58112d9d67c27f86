// libFuzzer target for the program loader: any byte string must load cleanly or be refused
// with a message; a program that loads is also run once on a small input.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/executor.h"
#include "runtime/program.h"
#include "tests/fuzz/program_runs.h"

// A program plans its methods' scratch arenas for its symbols' bounds, which a file may set to
// anything: the target refuses arenas over 256 MiB as vrun does under VRUN_MAX_ARENA_MB (an out
// of memory error) instead of asking the sanitizer's allocator for them (a 20 GiB arena made
// libFuzzer stop the run as out of memory).
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("VRUN_MAX_ARENA_MB", "256", 0);
  return 0;
}

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
