// Parakeet on Vulkan (lavapipe in CI): which backend runs each node of every method, and the same
// tokens as the CPU backend on every clip, with f32 and half-precision linear weights, a program
// handed over in memory, and chunked long audio.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/parakeet/parakeet_runner.h"
#include "models/parakeet/parakeet_import.h"
#include "preprocess/audio_loader.h"
#include "tests/parakeet/nemo_goldens.h"

namespace vrun::parakeet {
namespace {

const std::string kTestData = VRUN_TEST_DATA;
const std::string kData = kTestData + "/parakeet";

std::vector<std::pair<std::string, std::vector<float>>> clips() {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, c] : g["clips"].items()) {
    auto a = preprocess::load_audio(kTestData + "/" + c["path"].get<std::string>());
    EXPECT_TRUE(a.is_ok()) << name;
    if (a.is_ok()) out.emplace_back(name, a->samples);
  }
  return out;
}

// Nodes of `method` that do not run on Vulkan (views run nowhere: they only make strides).
std::vector<std::string> off_gpu(const ParakeetRunner& r, const std::string& method) {
  const MethodDef* m = r.program().method(method);
  EXPECT_NE(m, nullptr) << method;
  if (!m) return {};
  const auto backends = r.node_backends(method);
  std::vector<std::string> out;
  for (size_t n = 0; n < m->nodes.size(); ++n)
    if (!op_schema(m->nodes[n].op).is_view() && backends[n] != "vulkan")
      out.push_back(std::string(op_name(m->nodes[n].op)) + " " + m->nodes[n].name + " on " + backends[n]);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

Result<std::unique_ptr<ParakeetRunner>> vulkan_runner(const std::string& model, const BuildSettings& bs = {}) {
  auto m = import_nemo(kData + "/" + model);
  if (!m.is_ok()) return m.status();
  auto p = build_parakeet_program(*m, bs);
  if (!p.is_ok()) return p.status();
  return ParakeetRunner::load(std::move(*p), {BackendKind::kVulkan, 2, {}}, model);
}

// No Vulkan here (a build without it, or no device): the executor says kUnsupported.
bool no_vulkan(const Status& s) { return s.code() == ErrorCode::kUnsupported; }

// Every node on the GPU; on a CPU implementation (lavapipe) all but the greedy loop, which the
// backend leaves to the CPU there (the implementation cuts long loops short: tdt_kernel_wanted).
TEST(ParakeetVulkanPlacement, EveryMethodRunsWhollyOnTheGpu) {
  for (const char* model : {"tdt_small.nemo", "ctc_small.nemo"}) {
    auto r = vulkan_runner(model);
    if (!r.is_ok() && no_vulkan(r.status())) GTEST_SKIP() << r.status().message();
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    const std::string device = (*r)->device_description();
    if (!device.starts_with("vulkan")) GTEST_SKIP() << device;
    const bool cpu_impl = device.ends_with("(cpu)");
    for (const MethodDef& m : (*r)->program().methods) {
      SCOPED_TRACE(std::string(model) + " " + m.name);
      std::string want;
      if (cpu_impl)
        for (const NodeDef& n : m.nodes)
          if (n.op == OpKind::tdt_greedy) want += (want.empty() ? "" : ", ") + std::string("tdt_greedy ") + n.name + " on cpu";
      EXPECT_EQ(joined(off_gpu(**r, m.name)), want);
    }
  }
}

std::vector<int64_t> flat(const Decoded& d) {
  std::vector<int64_t> v;
  for (size_t i = 0; i < d.tokens.size(); ++i) {
    v.push_back(d.tokens[i].id);
    v.push_back(d.tokens[i].start);
    v.push_back(d.durations.empty() ? -1 : d.durations[i]);
  }
  return v;
}

// The CPU backend's tokens, frames and durations are checked against NeMo's in
// parakeet_goldens_test; here Vulkan must give exactly the CPU's on every short clip.
TEST(ParakeetVulkan, SameTokensAsTheCpuWithEachWeightDtype) {
  const auto audio = clips();
  for (std::optional<DType> wdt : {std::optional<DType>(), std::optional<DType>(DType::f16), std::optional<DType>(DType::bf16)}) {
    BuildSettings bs;
    bs.weight_dtype = wdt;
    SCOPED_TRACE(wdt ? dtype_name(*wdt) : "checkpoint dtype");
    auto gpu = vulkan_runner("tdt_small.nemo", bs);
    if (!gpu.is_ok() && no_vulkan(gpu.status())) GTEST_SKIP() << gpu.status().message();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
    if (!(*gpu)->device_description().starts_with("vulkan")) GTEST_SKIP() << (*gpu)->device_description();
    auto m = import_nemo(kData + "/tdt_small.nemo");
    ASSERT_TRUE(m.is_ok());
    auto p = build_parakeet_program(*m, bs);
    ASSERT_TRUE(p.is_ok());
    if (wdt) {
      int linear_half = 0;
      for (const auto& c : (*p)->constants) linear_half += c.dtype == *wdt;
      EXPECT_GT(linear_half, 0) << "no constant was stored in the weight dtype";
    }
    auto cpu = ParakeetRunner::load(std::move(*p), {BackendKind::kCpu, 2, {}});
    ASSERT_TRUE(cpu.is_ok()) << cpu.status().message();
    for (const auto& [name, samples] : audio) {
      if (name == "long_concat") continue;  // 341 frames of full attention: slow on lavapipe, chunked below
      SCOPED_TRACE(name);
      Transcript s1, s2;
      auto a = (*cpu)->decode(samples, {}, &s1);
      auto b = (*gpu)->decode(samples, {}, &s2);
      ASSERT_TRUE(a.is_ok()) << a.status().message();
      ASSERT_TRUE(b.is_ok()) << b.status().message();
      EXPECT_FALSE(a->tokens.empty());
      EXPECT_EQ(flat(*a), flat(*b));
    }
  }
}

// long_concat (27 s, 341 encoder frames) decoded on Vulkan and on the CPU by programs of `bs`:
// the same tokens, frames and durations, in `windows` encoder calls each.
void expect_long_clip_as_cpu(const BuildSettings& bs, const TranscribeOptions& o, int windows) {
  auto gpu = vulkan_runner("tdt_small.nemo", bs);
  if (!gpu.is_ok() && no_vulkan(gpu.status())) GTEST_SKIP() << gpu.status().message();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  if (!(*gpu)->device_description().starts_with("vulkan")) GTEST_SKIP() << (*gpu)->device_description();
  auto cpu = ParakeetRunner::load(kData + "/tdt_small.nemo", {BackendKind::kCpu, 2, bs});
  ASSERT_TRUE(cpu.is_ok());
  for (const auto& [name, samples] : clips()) {
    if (name != "long_concat") continue;
    Transcript s1, s2;
    auto a = (*cpu)->decode(samples, o, &s1);
    auto b = (*gpu)->decode(samples, o, &s2);
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    EXPECT_EQ(s1.stats.windows, windows);
    EXPECT_EQ(s2.stats.windows, windows);
    EXPECT_GT(a->tokens.size(), 10u);
    EXPECT_EQ(flat(*a), flat(*b));
  }
}

// A program of at most 96 encoder frames a call: the 27-s clip in 8 chunks, each overwriting the
// enc_proj state the joint reads its frames from.
TEST(ParakeetVulkan, ChunkedLongAudioSameTokensAsTheCpu) {
  BuildSettings bs;
  bs.max_encoder_frames = 96;
  bs.max_long_frames = 0;  // no encode_long: the clip goes in chunks
  TranscribeOptions o;
  o.chunk_frames = 48;
  o.context_frames = 24;
  expect_long_clip_as_cpu(bs, o, 8);
}

// encode_long on Vulkan: the clip whole (one window) through full attention over up to 400
// frames a call.
TEST(ParakeetVulkan, EncodeLongSameTokensAsTheCpu) {
  BuildSettings bs;
  bs.max_encoder_frames = 96;
  bs.max_long_frames = 400;
  expect_long_clip_as_cpu(bs, {}, 1);
}

// NeMo's limited-context attention (the windowed sdpa kernels) on Vulkan: NeMo's own tokens,
// frames and durations (goldens_local.json) on every clip, through encode_local. At most 200
// frames a call, so long_concat's 341 go in five chunks of 80 with 60 frames of context (beyond
// the receptive field of its 3 layers x (16 + 4) frames): chunked local attention gives the
// one-call tokens.
TEST(ParakeetVulkan, LocalAttentionMatchesNemo) {
  std::ifstream in(kData + "/goldens_local.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  BuildSettings bs;
  bs.local_window = g["window"].get<int64_t>();
  bs.max_local_frames = 200;
  bs.max_batch = 1;
  auto gpu = vulkan_runner("tdt_small.nemo", bs);
  if (!gpu.is_ok() && no_vulkan(gpu.status())) GTEST_SKIP() << gpu.status().message();
  ASSERT_TRUE(gpu.is_ok()) << gpu.status().message();
  if (!(*gpu)->device_description().starts_with("vulkan")) GTEST_SKIP() << (*gpu)->device_description();
  EXPECT_EQ(joined(off_gpu(**gpu, "encode_local")), "");
  TranscribeOptions o;
  o.local_attention = true;
  o.context_frames = 60;
  for (const auto& [name, samples] : clips()) {
    SCOPED_TRACE(name);
    Transcript st;
    auto d = (*gpu)->decode(samples, o, &st);
    ASSERT_TRUE(d.is_ok()) << d.status().message();
    if (name == "long_concat") {
      EXPECT_EQ(st.stats.windows, 5);
    }
    expect_tokens(*d, g["tdt"]["clips"][name]);
  }
}

}  // namespace
}  // namespace vrun::parakeet
