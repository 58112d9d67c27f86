// ONNX models exported from PyTorch (tests/reference/make_onnx_references.py) run by vrun and
// compared with onnxruntime's outputs: on the CPU, on Vulkan (lavapipe where there is no GPU),
// and on Vulkan with ops forced back to the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <set>
#include <utility>

#include "kernels/ops/op_registry.h"
#include "runtime/backend.h"
#include "models/onnx/npy_array.h"
#include "models/onnx/onnx_import.h"
#include "runtime/executor.h"

namespace vrun {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/onnx/";

struct Model {
  std::string name;
  std::vector<std::string> inputs, outputs;
};

const Model kSeed{"seed", {"x"}, {"y"}};
const Model kMobileNet{"mobilenet_v3_small", {"image"}, {"logits"}};
const Model kYolo{"yolo_tiny", {"images"}, {"p3", "p4"}};

// max |got - want| over max |want|: the relative error of the whole output.
double relative_error(const TensorView& got, const onnx::NpyTensor& want) {
  EXPECT_EQ(got.dtype, DType::f32);
  EXPECT_TRUE(got.is_contiguous());
  const auto* g = static_cast<const float*>(got.data);
  const auto* w = reinterpret_cast<const float*>(want.bytes.data());
  const size_t n = want.bytes.size() / 4;
  EXPECT_EQ(static_cast<size_t>(got.numel()), n);
  double diff = 0, scale = 0;
  for (size_t i = 0; i < n && i < static_cast<size_t>(got.numel()); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(g[i]) - w[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(w[i])));
  }
  EXPECT_GT(scale, 0.0) << "an all-zero reference proves nothing";
  return diff / scale;
}

struct RunOutcome {
  std::vector<std::string> backends;  // per node
  std::vector<std::string> ops;
};

// Runs `m` on `backend` and checks every output against onnxruntime's within 1e-4 relative.
RunOutcome check_model(const Model& m, BackendKind backend) {
  RunOutcome r;
  auto prog = onnx::import_onnx(kDir + m.name + ".onnx");
  EXPECT_TRUE(prog.is_ok()) << prog.status().to_string();
  if (!prog.is_ok()) return r;
  ExecutorOptions eo;
  eo.backend = backend;
  eo.threads = 2;
  auto ex = Executor::create(*prog, eo);
  if (!ex.is_ok() && backend == BackendKind::kVulkan) {
    ADD_FAILURE() << "no Vulkan device: " << ex.status().to_string();
    return r;
  }
  EXPECT_TRUE(ex.is_ok()) << ex.status().to_string();
  if (!ex.is_ok()) return r;
  std::vector<onnx::NpyTensor> ins;
  std::vector<TensorView> views;
  for (const auto& n : m.inputs) {
    auto t = onnx::read_npy_tensor(kDir + m.name + "." + n + ".npy");
    EXPECT_TRUE(t.is_ok()) << t.status().to_string();
    ins.push_back(std::move(*t));
  }
  for (auto& t : ins) views.push_back(t.view());
  auto outs = (*ex)->run("forward", views);
  EXPECT_TRUE(outs.is_ok()) << outs.status().to_string();
  if (!outs.is_ok()) return r;
  EXPECT_EQ(outs->size(), m.outputs.size());
  for (size_t k = 0; k < m.outputs.size() && k < outs->size(); ++k) {
    auto want = onnx::read_npy_tensor(kDir + m.name + "." + m.outputs[k] + ".ort.npy");
    EXPECT_TRUE(want.is_ok()) << want.status().to_string();
    if (!want.is_ok()) continue;
    EXPECT_EQ((*outs)[k].shape.vec(), want->shape) << m.outputs[k];
    const double e = relative_error((*outs)[k], *want);
    EXPECT_LE(e, 1e-4) << m.name << " output " << m.outputs[k] << " on " << backend_kind_name(backend);
  }
  r.backends = (*ex)->node_backends("forward");
  const MethodDef* md = (*ex)->program().method("forward");
  for (const auto& n : md->nodes) r.ops.push_back(op_name(n.op));
  return r;
}

std::set<std::string> backends_of(const RunOutcome& r, const std::string& op) {
  std::set<std::string> s;
  for (size_t i = 0; i < r.ops.size(); ++i)
    if (r.ops[i] == op) s.insert(r.backends[i]);
  return s;
}

// Every node but the views (which move no data) ran on Vulkan.
void expect_wholly_on_vulkan(const RunOutcome& r) {
  ASSERT_FALSE(r.ops.empty());
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const auto op = op_from_name(r.ops[i]);
    ASSERT_TRUE(op.has_value()) << r.ops[i];
    if (!op_schema(*op).is_view()) {
      EXPECT_EQ(r.backends[i], "vulkan") << r.ops[i];
    }
  }
}

// Each op of the run on just the backend named with it.
void expect_placed(const RunOutcome& r, std::initializer_list<std::pair<const char*, const char*>> placements) {
  for (const auto& [op, backend] : placements) EXPECT_EQ(backends_of(r, op), std::set<std::string>{backend}) << op;
}

// The model on Vulkan: wholly on the GPU (views aside), `ops` among what ran there.
void expect_on_vulkan(const Model& m, std::initializer_list<const char*> ops) {
  const RunOutcome r = check_model(m, BackendKind::kVulkan);
  for (const char* op : ops) EXPECT_EQ(backends_of(r, op), std::set<std::string>{"vulkan"}) << op;
  expect_wholly_on_vulkan(r);
}

TEST(OnnxModels, SeedModelOnTheCpu) {
  check_model(kSeed, BackendKind::kCpu);
}
TEST(OnnxModels, MobileNetV3SmallOnTheCpu) {
  check_model(kMobileNet, BackendKind::kCpu);
}
TEST(OnnxModels, YoloStyleDetectorOnTheCpu) {
  check_model(kYolo, BackendKind::kCpu);
}

TEST(OnnxModels, SeedModelOnVulkan) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  const RunOutcome r = check_model(kSeed, BackendKind::kVulkan);
  EXPECT_EQ(backends_of(r, "linear"), std::set<std::string>{"vulkan"});
}

TEST(OnnxModels, MobileNetV3SmallOnVulkan) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  // Wholly on the GPU, squeeze-excitation's global average pools (reduce_mean) included.
  expect_on_vulkan(kMobileNet, {"conv2d", "reduce_mean"});
}

TEST(OnnxModels, YoloStyleDetectorOnVulkan) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  // Wholly on the GPU, SPPF's max_pool2d included.
  expect_on_vulkan(kYolo, {"max_pool2d", "conv2d"});
}

// MobileNet and the YOLO-style model on Vulkan with `cpu_ops` forced onto the CPU (VRUN_CPU_OPS):
// check_model holds each to its reference.
std::pair<RunOutcome, RunOutcome> run_with_cpu_ops(const char* cpu_ops) {
  EXPECT_EQ(setenv("VRUN_CPU_OPS", cpu_ops, 1), 0);
  RunOutcome mobilenet = check_model(kMobileNet, BackendKind::kVulkan);
  RunOutcome yolo = check_model(kYolo, BackendKind::kVulkan);
  unsetenv("VRUN_CPU_OPS");
  return {std::move(mobilenet), std::move(yolo)};
}

TEST(OnnxModels, PoolingForcedOffTheGpuGivesTheSameResult) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  // The CPU runs the pools between GPU nodes, with the transfers around them.
  const auto [mobilenet, yolo] = run_with_cpu_ops("reduce_mean,max_pool2d");
  expect_placed(mobilenet, {{"reduce_mean", "cpu"}, {"conv2d", "vulkan"}});
  expect_placed(yolo, {{"max_pool2d", "cpu"}, {"conv2d", "vulkan"}});
}

TEST(OnnxModels, ConvForcedOffTheGpuGivesTheSameResult) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  const auto [mobilenet, yolo] = run_with_cpu_ops("conv2d");
  expect_placed(mobilenet, {{"conv2d", "cpu"}, {"linear", "vulkan"}});
  expect_placed(yolo, {{"conv2d", "cpu"}, {"silu", "vulkan"}});
}

TEST(OnnxModels, SymbolicBatchStaysSymbolic) {
  auto prog = onnx::import_onnx(kDir + "seed.onnx");
  ASSERT_TRUE(prog.is_ok()) << prog.status().to_string();
  const MethodDef* m = (*prog)->method("forward");
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->symbols.size(), 1u);
  EXPECT_EQ(m->symbols[0].name, "batch");
  // Run at a batch the export never saw: row i of the output depends on row i of the input only.
  auto x = onnx::read_npy_tensor(kDir + "seed.x.npy");
  auto want = onnx::read_npy_tensor(kDir + "seed.y.ort.npy");
  ASSERT_TRUE(x.is_ok() && want.is_ok());
  onnx::NpyTensor one = *x;
  one.shape[0] = 1;
  one.bytes.resize(16 * 4);
  ExecutorOptions eo;
  eo.backend = BackendKind::kCpu;
  auto ex = Executor::create(*prog, eo);
  ASSERT_TRUE(ex.is_ok());
  auto outs = (*ex)->run("forward", {one.view()});
  ASSERT_TRUE(outs.is_ok()) << outs.status().to_string();
  ASSERT_EQ((*outs)[0].shape.vec(), (std::vector<int64_t>{1, 5}));
  const float* y = static_cast<const float*>((*outs)[0].data);
  const float* w = reinterpret_cast<const float*>(want->bytes.data());
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(y[i], w[i], 1e-5 * std::max(1.0f, std::fabs(w[i])));
}

}  // namespace
}  // namespace vrun
