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

// Whether the BLAS sums a product's row the same whatever other rows share the call (probed once
// on this CPU). OpenBLAS 0.3.21 on an AMD EPYC with AVX-512 did not: rows 16-47 of a 48-row product
// differed in their last bits from the same rows computed as a 32-row product. Where it does not,
// a sequence's numbers in a batched call (Whisper's streams, Parakeet's batched encoder) agree
// with its numbers alone to rounding rather than bit for bit.
bool blas_rows_independent();

}  // namespace vrun
