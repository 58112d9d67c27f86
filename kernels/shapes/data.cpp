#include "kernels/shape_infer.h"

namespace vrun {

Status infer_shapes_data(OpKind op, const std::vector<const TensorDesc*>&, const Attrs&, std::vector<TensorDesc>*) {
  return err(ErrorCode::kUnsupported, op_name(op), ": shapes not available yet");
}

}  // namespace vrun
