// Convolution geometry from attributes, shared by the shape function and the CPU kernel so both
// read stride/padding/dilation by the same rules.
#pragma once

#include <cstdint>

#include "kernels/ops/attrs.h"
#include "runtime/base/tensor.h"
#include "runtime/base/status.h"

namespace vrun {

// nd = 1 or 2 spatial dims. Attribute lists may give one value for every dim; padding may also
// give one per dim (both sides) or [lo, hi] per dim.
Status conv_spatial_params(const char* op, const Attrs& attrs, int nd, int64_t* stride, int64_t* dil,
                           int64_t* pad_lo, int64_t* pad_hi);

// max_pool2d's output height and width for x [B, C, H, W] (validates kernel/stride/padding).
Status pool_output_sizes(const Attrs& attrs, const Shape& x, int64_t* oh, int64_t* ow);

}  // namespace vrun
