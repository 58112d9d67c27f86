#include "kernels/cpu/blas_core.h"

#include <strings.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#ifdef VRUN_HAVE_OPENBLAS
#include <cblas.h>

// OpenBLAS built for several CPUs (DYNAMIC_ARCH, as Debian's is) picks its kernels once, when the
// library loads, from the CPU's family and model. A model newer than the library (Emerald Rapids,
// model 207, under Debian 12's 0.3.21) is not in its table and gets the SSE3 "Prescott" kernels,
// whatever vector units the CPU has: Whisper tiny.en's encoder ran 2.5x slower a window on such a
// machine. These two functions choose again, reading OPENBLAS_CORETYPE; they are absent from
// builds for one CPU, hence weak.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));
#endif

namespace vrun {

namespace {

#ifdef VRUN_HAVE_OPENBLAS
// The widest OpenBLAS core this CPU runs (names as OPENBLAS_CORETYPE takes them), or nullptr.
const char* widest_core() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Cores without AVX2 that OpenBLAS 0.3.x may fall back to.
bool is_pre_avx2(const char* core) {
  static const char* const kOld[] = {"prescott", "core2",  "penryn",  "dunnington", "nehalem", "atom",
                                     "katmai",   "banias", "northwood", "coppermine", "sandybridge"};
  for (const char* c : kOld)
    if (strcasecmp(core, c) == 0) return true;
  return false;
}
#endif

std::string g_initial, g_current;

}  // namespace

void prepare_blas() {
  static std::once_flag once;
  std::call_once(once, [] {
#ifdef VRUN_HAVE_OPENBLAS
    const char* name = openblas_get_corename();
    g_initial = g_current = name ? name : "";
    const char* want = widest_core();
    // The user's OPENBLAS_CORETYPE is theirs to keep.
    if (!std::getenv("OPENBLAS_CORETYPE") && want && name && is_pre_avx2(name) && gotoblas_dynamic_init &&
        gotoblas_dynamic_quit) {
      // Before any product has run: the buffers OpenBLAS sizes from its core are taken at the first.
      setenv("OPENBLAS_CORETYPE", want, 0);
      gotoblas_dynamic_quit();
      gotoblas_dynamic_init();
      unsetenv("OPENBLAS_CORETYPE");
      name = openblas_get_corename();
      g_current = name ? name : "";
    }
    // OpenBLAS runs single-threaded: vrun's pool splits the products (gemm.cpp).
    openblas_set_num_threads(1);
#endif
  });
}

BlasCore blas_core() {
  prepare_blas();
  return {g_initial, g_current};
}

bool blas_rows_independent() {
  static const bool independent = [] {
#ifdef VRUN_HAVE_OPENBLAS
    prepare_blas();
    const int m = 48, n = 24, k = 96, skip = 16;
    std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), all(static_cast<size_t>(m * n)),
        part(static_cast<size_t>((m - skip) * n));
    uint32_t h = 12345;
    for (std::vector<float>* v : {&a, &b})
      for (float& x : *v) {
        h = h * 1664525u + 1013904223u;
        x = static_cast<float>(h >> 8) / 16777216.0f - 0.5f;
      }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.f, a.data(), k, b.data(), k, 0.f, all.data(), n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m - skip, n, k, 1.f, a.data() + skip * k, k, b.data(), k, 0.f,
                part.data(), n);
    return std::equal(part.begin(), part.end(), all.begin() + skip * n);
#else
    return true;  // vrun's own products sum each row alone
#endif
  }();
  return independent;
}

}  // namespace vrun
