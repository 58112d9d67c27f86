// What the CPU can run, asked once, and the target attribute of the AVX2 code paths (the rest
// of the file is compiled for the baseline ISA, so those functions carry it themselves).
#pragma once

#define VRUN_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace vrun {

// AVX2 with FMA; every such CPU has F16C too (clang cannot test F16C by name).
inline bool cpu_has_avx2() {
  static const bool v = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return v;
}

}  // namespace vrun
