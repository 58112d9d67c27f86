// The BLAS library under the CPU backend's large products: made ready once before the first
// (one thread, and, for OpenBLAS that chose kernels older than the CPU, the widest it has).
#pragma once

#include <string>

namespace vrun {

// Idempotent and thread-safe; sgemm calls it.
void prepare_blas();

// The OpenBLAS core chosen when the library loaded and the one in use now (both empty without
// OpenBLAS); they differ where prepare_blas chose again.
struct BlasCore {
  std::string at_load, now;
};
BlasCore blas_core();

}  // namespace vrun
