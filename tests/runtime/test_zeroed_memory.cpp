// State memory: zero before any write, zero again after zero(), page-aligned, movable; and the
// executor's states read zero after reset_state however much was written into them.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "runtime/executor.h"
#include "runtime/base/zeroed_memory.h"
#include "tests/runtime/tiny_transformer.h"

namespace vrun::test {
namespace {

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != 0) return false;
  return true;
}

TEST(ZeroedMemory, StartsZeroAndZeroesAgain) {
  for (size_t bytes : {size_t{1}, size_t{4095}, size_t{4096}, size_t{3} << 20}) {
    ZeroedMemory m(bytes);
    ASSERT_NE(m.data(), nullptr) << bytes;
    EXPECT_EQ(m.size(), bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.data()) % 64, 0u);
    EXPECT_TRUE(all_zero(m.data(), bytes)) << bytes;
    std::memset(m.data(), 0x5a, bytes);
    m.data()[bytes - 1] = 7;
    m.zero();
    EXPECT_TRUE(all_zero(m.data(), bytes)) << bytes << " after zero()";
    m.data()[bytes / 2] = 1;  // still writable after its pages were handed back
    EXPECT_EQ(m.data()[bytes / 2], 1);
  }
}

TEST(ZeroedMemory, MovesOwnership) {
  ZeroedMemory a(10000);
  a.data()[9999] = 3;
  uint8_t* p = a.data();
  ZeroedMemory b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(b.data()[9999], 3);
  ZeroedMemory c(16);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.size(), 10000u);
  a.zero();  // a moved-from buffer is empty, not broken
}

TEST(ZeroedMemory, ExecutorStatesReadZeroAfterReset) {
  auto built = build_tiny_transformer(make_tiny_weights(TinyConfig{}, 5));
  ASSERT_TRUE(built.is_ok()) << built.status().to_string();
  ExecutorOptions o;
  o.backend = BackendKind::kCpu;
  auto ex = Executor::create(*built, o);
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  const TensorView k = (*ex)->state("cache.k.0");
  ASSERT_TRUE(k.data);
  const size_t bytes = static_cast<size_t>(k.dense_bytes());
  const auto* p = static_cast<const uint8_t*>(k.data);
  EXPECT_TRUE(all_zero(p, bytes)) << "a new executor's cache";
  std::vector<int32_t> toks = {5, 1, 33, 8};
  auto out = (*ex)->run("forward", {TensorView::dense(toks.data(), DType::i32, {1, 4})}, {{"pos", 0}});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_FALSE(all_zero(p, bytes)) << "the prefill wrote its keys";
  (*ex)->reset_state();
  EXPECT_TRUE(all_zero(p, bytes)) << "after reset_state";
}

}  // namespace
}  // namespace vrun::test
