// Helpers for Vulkan kernel tests: one validated Context for the whole binary (lavapipe in CI),
// host tensors uploaded with their strides and storage offsets intact, ops run through a
// Recorder exactly as the executor does, and outputs read back as float64.
//
// Tolerances (|got - want| <= atol + rtol * |want|, against float64 math on the same rounded
// inputs): f32 outputs 1e-5 relative plus an absolute term scaled by the reduction length;
// f16 outputs 2e-3 relative (about 2 ulp of a half); bf16 outputs 1.6e-2 relative (2 ulp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "kernels/ops/shape_infer.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/memory.h"
#include "kernels/vulkan/ops.h"
#include "kernels/vulkan/pipelines.h"
#include "kernels/vulkan/recorder.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/kernels/tdt_greedy_case.h"

namespace vrun::test {

// The shared context; nullptr (with the reason in *why) when there is none. *device_exists says
// whether a device would have been there without the validation layer: a machine with a GPU but
// no layer installed must not pass by skipping every test.
inline vulkan::Context* vk_context(std::string* why = nullptr, bool* device_exists = nullptr) {
  static std::string reason;
  static bool exists = false;
  static std::unique_ptr<vulkan::Context> ctx = [] {
    vulkan::ContextOptions o;
    // VRUN_VALIDATION=0 runs without the layer (e.g. to exercise extensions newer than it).
    const char* env = std::getenv("VRUN_VALIDATION");
    o.validation = !(env && std::string(env) == "0");
    auto r = vulkan::Context::create(o);
    if (!r.is_ok()) {
      reason = r.status().to_string();
      if (o.validation) {
        o.validation = false;
        exists = vulkan::Context::create(o).is_ok();
      }
      std::fprintf(stderr, "vulkan tests %s: %s\n", exists ? "cannot run" : "skipped", reason.c_str());
      return std::unique_ptr<vulkan::Context>();
    }
    exists = true;
    std::fprintf(stderr, "vulkan tests on %s (%s)\n", (*r)->info().name.c_str(), (*r)->info().type.c_str());
    return std::move(r).value();
  }();
  if (why) *why = reason;
  if (device_exists) *device_exists = exists;
  return ctx.get();
}

// Skips without a device; fails the test on any validation error raised while it ran.
class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    bool device_exists = false;
    ctx_ = vk_context(&why, &device_exists);
    if (!ctx_ && device_exists)
      GTEST_FAIL() << why << "; the device works without the layer: install it, or set VRUN_VALIDATION=0 "
                   << "to run these tests without validation";
    if (!ctx_) GTEST_SKIP() << "no Vulkan device: " << why;
    errors_before_ = ctx_->validation_errors();
  }
  void TearDown() override {
    if (ctx_) {
      EXPECT_EQ(ctx_->validation_errors(), errors_before_) << "Vulkan validation errors (see stderr)";
    }
  }
  vulkan::Context& ctx() { return *ctx_; }

  struct DeviceTensor {
    vulkan::Buffer buffer;
    vulkan::DeviceView view;
  };

  // The whole host storage is uploaded, so the view keeps its byte offset and strides.
  DeviceTensor to_device(const HostTensor& h) {
    DeviceTensor d;
    const uint64_t bytes = h.storage->size();
    auto buf = ctx().allocator().allocate(bytes);
    EXPECT_TRUE(buf.is_ok()) << buf.status().to_string();
    d.buffer = std::move(buf).value();
    EXPECT_TRUE(vulkan::upload(ctx(), d.buffer.ref(), 0, h.storage->data(), bytes).is_ok());
    d.view.buffer = d.buffer.ref();
    d.view.offset = static_cast<uint64_t>(static_cast<const uint8_t*>(h.view.data) - h.storage->data());
    d.view.dtype = h.view.dtype;
    d.view.shape = h.view.shape;
    d.view.strides = h.view.strides;
    return d;
  }

  HostTensor to_host(const vulkan::DeviceView& v) {
    HostTensor h = make_tensor(v.dtype, v.shape);
    Status s = vulkan::download(ctx(), v.buffer, v.offset, h.view.data, v.dense_bytes());
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return h;
  }

  // Runs op on the GPU: infer shapes, allocate dense outputs, record, submit, read back.
  // nullptr inputs are absent optionals. Fails the test if the op is not supported.
  std::vector<HostTensor> run_gpu(OpKind op, const std::vector<const HostTensor*>& inputs, const Attrs& attrs) {
    std::vector<TensorDesc> descs(inputs.size());
    std::vector<const TensorDesc*> ptrs;
    std::vector<DeviceTensor> dev;
    std::vector<vulkan::DeviceView> views;
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!inputs[k]) {
        ptrs.push_back(nullptr);
        views.emplace_back();
        continue;
      }
      descs[k] = {inputs[k]->view.dtype, inputs[k]->view.shape};
      ptrs.push_back(&descs[k]);
      dev.push_back(to_device(*inputs[k]));
      views.push_back(dev.back().view);
    }
    std::vector<TensorDesc> out_desc;
    Status s = infer_shapes(op, ptrs, attrs, &out_desc);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_TRUE(vulkan::supports(ctx(), op, ptrs, attrs)) << op_name(op) << " unsupported";
    std::vector<vulkan::Buffer> out_bufs;
    std::vector<vulkan::DeviceView> outs;
    for (const auto& d : out_desc) {
      auto b = ctx().allocator().allocate(std::max<int64_t>(dtype_bytes(d.dtype, d.shape.numel()), 4));
      EXPECT_TRUE(b.is_ok());
      outs.push_back(vulkan::DeviceView::dense(b->ref(), d.dtype, d.shape));
      out_bufs.push_back(std::move(b).value());
    }
    auto rec = vulkan::Recorder::create(ctx());
    EXPECT_TRUE(rec.is_ok());
    s = (*rec)->record(op, views, outs, attrs);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    s = (*rec)->submit_and_wait();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    std::vector<HostTensor> result;
    for (const auto& o : outs) result.push_back(to_host(o));
    return result;
  }

  vulkan::Context* ctx_ = nullptr;
  uint64_t errors_before_ = 0;
};

// Rounds every element of an f32 view to the nearest half in place: tests of kernels that feed
// f32 operands to the tensor cores as halves give the float64 reference the operands multiplied.
inline void round_to_halves(HostTensor& t) {
  for_each_index(t.view.shape, [&](const int64_t* i) {
    store_double(t.view, i, f16_to_f32(f32_to_f16(static_cast<float>(load_double(t.view, i)))));
  });
}

inline double rtol_for(DType t) { return t == DType::f16 ? 2e-3 : t == DType::bf16 ? 1.6e-2 : 1e-5; }

}  // namespace vrun::test
