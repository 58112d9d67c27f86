// Row normalisation shared by the layer_norm / rms_norm kernels and linear's norm prologue, so
// that a normalisation fused into a projection rounds exactly as the separate op does.
#pragma once

#include <cstdint>

namespace vrun::cpu {

// One row of d floats normalised in place, statistics in f32 lanes (two passes for layer):
// layer: r = (r - mean) / sqrt(var + eps) * w + b (b may be null); rms: r = r / sqrt(mean(r^2) + eps) * w.
void normalize_row(float* r, int64_t d, bool rms, float eps, const float* w, const float* b);

}  // namespace vrun::cpu
