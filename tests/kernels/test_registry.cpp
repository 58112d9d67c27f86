// Invariant 1: every op in ops.def runs on the CPU. View ops are computed by compute_view; every
// other op needs a CPU kernel. Also checks that ops.def itself parses into sane schemas.
#include <gtest/gtest.h>

#include "kernels/cpu/cpu_kernel.h"
#include "kernels/ops/views.h"

namespace vrun {
namespace {

TEST(OpRegistry, EveryOpHasACpuKernelOrIsAView) {
  std::vector<std::string> missing;
  for (int k = 0; k < kNumOps; ++k) {
    const OpKind op = static_cast<OpKind>(k);
    const OpSchema& s = op_schema(op);
    if (s.is_view()) {
      // compute_view must know it: a call with an empty input gives an argument error, never
      // "not a view op".
      TensorView x = TensorView::dense(reinterpret_cast<void*>(uintptr_t{4096}), DType::f32, Shape{3, 5});
      std::vector<TensorView> out;
      const Status st = compute_view(op, x, Attrs(op), &out);
      EXPECT_NE(st.code(), ErrorCode::kInternal) << s.name << ": " << st.message();
      continue;
    }
    if (!cpu_kernels().get(op)) missing.push_back(s.name);
  }
  EXPECT_TRUE(missing.empty()) << "ops without a CPU kernel: " << ::testing::PrintToString(missing);
}

TEST(OpRegistry, SchemasAreConsistent) {
  for (int k = 0; k < kNumOps; ++k) {
    const OpSchema& s = op_schema(static_cast<OpKind>(k));
    EXPECT_EQ(static_cast<int>(s.kind), k);
    EXPECT_EQ(op_from_name(s.name), s.kind) << s.name;
    EXPECT_FALSE(s.outputs.empty()) << s.name;
    for (size_t i = 0; i + 1 < s.inputs.size(); ++i) EXPECT_FALSE(s.inputs[i].variadic) << s.name << ": only the last input may be variadic";
    for (const auto& a : s.attrs) EXPECT_FALSE(a.name.empty()) << s.name;
  }
  EXPECT_FALSE(op_from_name("no_such_op").has_value());
  EXPECT_EQ(op_schema(OpKind::linear).inputs[1].contiguous, true);
  EXPECT_EQ(op_schema(OpKind::linear).inputs[2].optional, true);
  EXPECT_EQ(op_schema(OpKind::concat).max_inputs(), -1);
  EXPECT_DOUBLE_EQ(op_schema(OpKind::layer_norm).attr("eps")->f, 1e-5);
  EXPECT_EQ(op_schema(OpKind::conv2d).attr("stride")->ints, (std::vector<int64_t>{1, 1}));
}

TEST(DTypes, HalfAndBfloatConversionsRoundToNearestEven) {
  // Every half value converts to float and back exactly.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (f != f) continue;  // nan payloads
    EXPECT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);      // rounds to inf
  EXPECT_EQ(f32_to_f16(1.0009765625f / 2 + 0.5f), f32_to_f16(1.0009765625f / 2 + 0.5f));
  EXPECT_EQ(f32_to_f16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(2.9802322387695312e-08f), 0x0000);  // half of it ties to even (zero)
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3f80);  // tie to even
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3f82);
  EXPECT_FLOAT_EQ(bf16_to_f32(0x4049), 3.140625f);
}

}  // namespace
}  // namespace vrun
