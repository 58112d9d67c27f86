// The view ops (family `view` in ops.def): they compute a new shape, strides and storage offset
// over their input's memory, never copying. The executor applies them at run time; the builder
// applies them at build time to learn shapes and whether a layout needs an explicit copy.
#pragma once

#include <vector>

#include "kernels/ops/attrs.h"
#include "runtime/base/status.h"
#include "runtime/base/tensor.h"

namespace vrun {

// out receives one view per output (split: one per size). x.data may be any address; the
// outputs' data pointers are offset from it. Errors say why a view is impossible (e.g. a
// reshape of a layout that would need a copy: kUnsupported, so the builder can insert one).
Status compute_view(OpKind op, const TensorView& x, const Attrs& attrs, std::vector<TensorView>* out);

}  // namespace vrun
