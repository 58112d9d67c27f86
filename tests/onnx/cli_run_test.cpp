// vrun run / info / export on ONNX files, end to end through the binary.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend.h"
#include "../cli/cli_test_util.h"
#include "models/onnx/npy_array.h"

namespace vrun {
namespace {

using testing::contains;
using testing::run_vrun;

const std::string kDir = std::string(VRUN_TEST_DATA) + "/onnx/";

double relative_error(const std::string& got_path, const std::string& want_path) {
  auto got = onnx::read_npy_tensor(got_path);
  auto want = onnx::read_npy_tensor(want_path);
  EXPECT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_TRUE(want.is_ok()) << want.status().to_string();
  if (!got.is_ok() || !want.is_ok()) return 1e9;
  EXPECT_EQ(got->shape, want->shape);
  const auto* g = reinterpret_cast<const float*>(got->bytes.data());
  const auto* w = reinterpret_cast<const float*>(want->bytes.data());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want->bytes.size() / 4 && i < got->bytes.size() / 4; ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
  }
  return diff / scale;
}

TEST(CliRun, WritesEachOutputAsNpy) {
  const std::string out = ::testing::TempDir() + "/vrun_run_yolo";
  const auto r = run_vrun("run -m " + kDir + "yolo_tiny.onnx --input images=" + kDir +
                              "yolo_tiny.images.npy -o " + out + " --backend cpu",
                          "run_yolo");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "p3: f32 [1, 12, 16, 16]")) << r.out;
  EXPECT_LE(relative_error(out + "/p3.npy", kDir + "yolo_tiny.p3.ort.npy"), 1e-4);
  EXPECT_LE(relative_error(out + "/p4.npy", kDir + "yolo_tiny.p4.ort.npy"), 1e-4);
}

TEST(CliRun, ExportedProgramGivesTheSameOutputs) {
  const std::string vrp = ::testing::TempDir() + "/vrun_seed.vrp",
                    out = ::testing::TempDir() + "/vrun_run_seed";
  ASSERT_EQ(run_vrun("export -m " + kDir + "seed.onnx -o " + vrp, "export_seed").exit_code, 0);
  const auto r = run_vrun("run -m " + vrp + " --input x=" + kDir + "seed.x.npy -o " + out, "run_seed_vrp");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LE(relative_error(out + "/y.npy", kDir + "seed.y.ort.npy"), 1e-4);
}

// --repeat: the outputs are the single call's, and the times of the first call and of the
// repeats are printed; a negative count is refused before the model is read.
TEST(CliRun, RepeatPrintsTheTimesAndKeepsTheOutputs) {
  const std::string out = ::testing::TempDir() + "/vrun_run_seed_repeat";
  auto r = run_vrun("run -m " + kDir + "seed.onnx --input x=" + kDir + "seed.x.npy -o " + out + " --backend cpu --repeat 3",
                    "run_seed_repeat");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "first call")) << r.err;
  EXPECT_TRUE(contains(r.err, "then 3 calls: median")) << r.err;
  EXPECT_LE(relative_error(out + "/y.npy", kDir + "seed.y.ort.npy"), 1e-4);
  r = run_vrun("run -m /nonexistent.onnx --input x=" + kDir + "seed.x.npy --repeat -2", "run_bad_repeat");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "--repeat must be in 0..100000, got -2")) << r.err;
}

TEST(CliRun, MissingOrWrongInputsAreReported) {
  auto r = run_vrun("run -m " + kDir + "seed.onnx -o " + ::testing::TempDir(), "run_no_input");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "x")) << r.err;
  r = run_vrun("run -m " + kDir + "seed.onnx --input y=" + kDir + "seed.x.npy", "run_wrong_name");
  EXPECT_NE(r.exit_code, 0);
  r = run_vrun("run -m " + kDir + "unsupported_op.onnx --input x=" + kDir + "seed.x.npy", "run_unsupported");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.err, "Det")) << r.err;
}

TEST(CliInfo, ShowsTheSplitAndForcingAnOpToTheCpuKeepsTheResult) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  auto r = run_vrun("info -m " + kDir + "yolo_tiny.onnx --backend vulkan --nodes", "info_yolo");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "max_pool2d x3 (vulkan)")) << r.out;
  EXPECT_TRUE(contains(r.out, "conv2d x27 (vulkan)")) << r.out;
  // Every op on the GPU: the ops line names no CPU node.
  const size_t ops = r.out.find("  ops:");
  ASSERT_NE(ops, std::string::npos) << r.out;
  EXPECT_FALSE(contains(r.out.substr(ops, r.out.find('\n', ops) - ops), "(cpu)")) << r.out;
  ASSERT_EQ(setenv("VRUN_CPU_OPS", "conv2d,concat,max_pool2d", 1), 0);
  r = run_vrun("info -m " + kDir + "yolo_tiny.onnx --backend vulkan --nodes", "info_yolo_forced");
  const std::string out = ::testing::TempDir() + "/vrun_run_forced";
  const auto run = run_vrun("run -m " + kDir + "yolo_tiny.onnx --input images=" + kDir +
                                "yolo_tiny.images.npy -o " + out + " --backend vulkan",
                            "run_yolo_forced");
  unsetenv("VRUN_CPU_OPS");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "conv2d x27 (cpu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "concat x6 (cpu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "max_pool2d x3 (cpu)")) << r.out;
  EXPECT_TRUE(contains(r.out, "silu x24 (vulkan)")) << r.out;
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_LE(relative_error(out + "/p3.npy", kDir + "yolo_tiny.p3.ort.npy"), 1e-4);
  EXPECT_LE(relative_error(out + "/p4.npy", kDir + "yolo_tiny.p4.ort.npy"), 1e-4);
}

}  // namespace
}  // namespace vrun
