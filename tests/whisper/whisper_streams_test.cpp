// Several files through Whisper's streams (WhisperRunner::transcribe_many): the stream methods
// give the one-window methods' numbers bit for bit, and every file's transcript equals the one it
// gets alone (tiny.en, on the CPU and on Vulkan, lavapipe in CI): greedy with the temperature
// fallback, conditioning, files of one to several windows and a silent one, and files with
// options of their own (no timestamps, word timestamps, an initial prompt, beam search). And the
// fused encoder (convolutions as matrix products, sdpa attention, fc1's gelu in its linear: what
// the runner builds) against the conv1d and two-matmul one, on the same toy model.
#include <gtest/gtest.h>

#include <cmath>

#include "apps/whisper/whisper_runner.h"
#include "kernels/cpu/blas_core.h"
#include "models/whisper/whisper_model.h"
#include "runtime/backend.h"
#include "runtime/base/dtype.h"
#include "runtime/executor.h"
#include "tests/whisper/whisper_clips.h"

namespace vrun::whisper {
namespace {

// Whether there is a Vulkan device (lavapipe counts).
bool has_vulkan() {
  const BackendEntry* vk = find_backend("vulkan");
  return vk && vk->device_count && vk->device_count() > 0;
}

class WhisperStreams : public ::testing::TestWithParam<BackendKind> {
 protected:
  void SetUp() override {
    if (GetParam() == BackendKind::kVulkan && !has_vulkan()) GTEST_SKIP() << "no Vulkan device";
  }
};

// tolerance 0: bit for bit; otherwise |a - b| <= tolerance * (1 + |a|).
void expect_equal_floats(const TensorView& a, const TensorView& b, const std::string& what, double tolerance = 0) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  int64_t differ = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.ptr<float>()[i], y = b.ptr<float>()[i];
    if (!(std::fabs(x - y) <= tolerance * (1 + std::fabs(x))) && ++differ == 1) first = i;
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " of " << a.numel() << " values differ, the first at " << first << " ("
                       << (first >= 0 ? a.ptr<float>()[first] : 0) << " vs " << (first >= 0 ? b.ptr<float>()[first] : 0) << ")";
}

// A Whisper of tiny proportions with random f32 weights (100 encoder positions, 64 wide, two
// layers each side, 512 ids): the stream methods' numbers without a real model's cost (a
// tiny.en window takes minutes on lavapipe).
WhisperConfig toy_config() {
  WhisperConfig c;
  c.n_mels = 80;
  c.n_audio_ctx = 100;
  c.n_audio_state = c.n_text_state = 64;
  c.n_audio_head = c.n_text_head = 2;
  c.n_audio_layer = c.n_text_layer = 2;
  c.n_vocab = 512;
  c.n_text_ctx = 64;
  return c;
}

WeightSource toy_weights(const WhisperConfig& c) {
  return [c](const std::string& n) -> std::optional<Weight> {
    const int64_t d = c.n_text_state;
    auto has = [&](const char* part) { return n.find(part) != std::string::npos; };
    auto ends = [&](const std::string& e) { return n.size() >= e.size() && n.compare(n.size() - e.size(), e.size(), e) == 0; };
    std::vector<int64_t> shape;
    if (n == "encoder/conv1/weight") shape = {d, c.n_mels, 3};
    else if (n == "encoder/conv2/weight") shape = {d, d, 3};
    else if (n == "encoder/position_encodings/encodings") shape = {c.n_audio_ctx, d};
    else if (n == "decoder/position_encodings/encodings") shape = {c.n_text_ctx, d};
    else if (n == "decoder/embeddings/weight") shape = {c.n_vocab, d};
    else {
      int64_t rows = d, cols = d;
      if (has("self_attention/linear_0")) rows = 3 * d;
      else if (has("attention/linear_1") && !has("self_attention")) rows = 2 * d;
      else if (has("ffn/linear_0")) rows = 4 * d;
      else if (has("ffn/linear_1")) cols = 4 * d;
      shape = ends("/weight") && !has("layer_norm") ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
    }
    int64_t count = 1;
    for (int64_t v : shape) count *= v;
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(count));
    uint64_t h = std::hash<std::string>{}(n) | 1;
    const bool gamma = ends("/gamma");
    for (float& v : *buf) {
      h ^= h << 13, h ^= h >> 7, h ^= h << 17;
      v = (gamma ? 1.0f : 0.0f) + (gamma ? 0.1f : 0.2f) * (static_cast<float>(h % 20001) / 10000.0f - 1.0f);
    }
    return Weight{DType::f32, shape, buf->data(), buf};
  };
}

// encode and encode_streams, prefill and prefill_stream, step and step_streams_B: the same bits
// on the CPU. On Vulkan the attention kernels split the keys by the batch and cache length they
// see (a step of several streams over the whole cache against one stream's filled part), so the
// steps' logits agree to rounding there and their greedy token is the same.
TEST_P(WhisperStreams, StreamMethodsEqualTheOneWindowMethods) {
  const WhisperConfig config = toy_config();
  BuildSettings bs;
  bs.streams = 4;
  auto program = build_whisper_program(config, toy_weights(config), {}, bs);
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  ExecutorOptions eo;
  eo.backend = GetParam();
  auto ex = Executor::create(*program, eo);
  ASSERT_TRUE(ex.is_ok()) << ex.status().message();
  Executor& e = **ex;
  // Bit for bit on the CPU where its BLAS sums a row alike whatever rows share the call; to
  // rounding otherwise (blas_rows_independent).
  const double cpu_tolerance = blas_rows_independent() ? 0 : 1e-3;
  const int64_t n_mels = config.n_mels, frames = 2 * config.n_audio_ctx, ctx = config.n_text_ctx;
  // Three windows of random features.
  std::vector<float> mels(static_cast<size_t>(3 * n_mels * frames));
  uint64_t h = 12345;
  for (float& v : mels) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    v = static_cast<float>(h % 20001) / 10000.0f - 1.0f;
  }
  // One window, then two more from stream 1 on (lavapipe binds at most 128 MiB: two windows'
  // attention scores in one call).
  for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, 2}}) {
    auto enc = e.run("encode_streams", {TensorView::dense(mels.data() + first * n_mels * frames, DType::f32, {count, n_mels, frames})},
                     {{"first", first}});
    ASSERT_TRUE(enc.is_ok()) << enc.status().message();
  }
  const std::vector<int32_t> prompt = {500, 501};
  const std::vector<int32_t> steps = {38, 206, 75};
  std::vector<std::vector<float>> alone_logits;  // [stream][step]: the one-window methods' logits
  for (int s = 0; s < 3; ++s) {
    ASSERT_TRUE(e.run("encode", {TensorView::dense(mels.data() + s * n_mels * frames, DType::f32, {1, n_mels, frames})}).is_ok());
    const std::vector<float> cross(e.state("cross.kv.0").ptr<float>(), e.state("cross.kv.0").ptr<float>() + e.state("cross.kv.0").numel());
    ASSERT_TRUE(e.run("select_stream", {}, {{"slot", s}}).is_ok());
    expect_equal_floats(TensorView::dense(const_cast<float*>(cross.data()), DType::f32, {static_cast<int64_t>(cross.size())}),
                        e.state("cross.kv.0"), "stream " + std::to_string(s) + "'s cross K/V", cpu_tolerance);
    std::vector<int32_t> t = prompt, p = {0, 1};
    auto a = e.run("prefill", {TensorView::dense(t.data(), DType::i32, {1, 2}), TensorView::dense(p.data(), DType::i32, {1, 2})}, {{"pos", 0}});
    ASSERT_TRUE(a.is_ok()) << a.status().message();
    const std::vector<float> pre((*a)[0].ptr<float>(), (*a)[0].ptr<float>() + (*a)[0].numel());
    auto b = e.run("prefill_stream", {TensorView::dense(t.data(), DType::i32, {1, 2}), TensorView::dense(p.data(), DType::i32, {1, 2})},
                   {{"pos", 0}, {"slot", s}});
    ASSERT_TRUE(b.is_ok()) << b.status().message();
    expect_equal_floats(TensorView::dense(const_cast<float*>(pre.data()), DType::f32, {static_cast<int64_t>(pre.size())}), (*b)[0],
                        "prefill of stream " + std::to_string(s), cpu_tolerance);
    for (size_t i = 0; i < steps.size(); ++i) {
      int32_t tok = steps[i], pos = static_cast<int32_t>(2 + i);
      auto c = e.run("step", {TensorView::dense(&tok, DType::i32, {1, 1}), TensorView::dense(&pos, DType::i32, {1, 1})}, {{"pos", pos}});
      ASSERT_TRUE(c.is_ok()) << c.status().message();
      alone_logits.emplace_back((*c)[0].ptr<float>(), (*c)[0].ptr<float>() + (*c)[0].numel());
    }
  }
  // The three streams' steps together (step_streams_4: the fourth row has no stream of its own).
  const int64_t V = config.n_vocab;
  for (size_t i = 0; i < steps.size(); ++i) {
    std::vector<int32_t> toks(4, steps[i]), pos(4, static_cast<int32_t>(2 + i)), rows(4);
    pos[3] = 0;
    for (int b = 0; b < 4; ++b) rows[static_cast<size_t>(b)] = static_cast<int32_t>(b * ctx + pos[static_cast<size_t>(b)]);
    auto c = e.run("step_streams_4", {TensorView::dense(toks.data(), DType::i32, {4, 1}), TensorView::dense(pos.data(), DType::i32, {4, 1}),
                                      TensorView::dense(rows.data(), DType::i32, {4})});
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    const double tolerance = GetParam() == BackendKind::kCpu ? cpu_tolerance : 1e-4;
    for (int s = 0; s < 3; ++s) {
      std::vector<float>& want = alone_logits[static_cast<size_t>(s) * steps.size() + i];
      const float* got = (*c)[0].ptr<float>() + s * V;
      const std::string what = "step " + std::to_string(i) + " of stream " + std::to_string(s);
      expect_equal_floats(TensorView::dense(want.data(), DType::f32, {V}), TensorView::dense(const_cast<float*>(got), DType::f32, {V}),
                          what, tolerance);
      EXPECT_EQ(std::max_element(got, got + V) - got, std::max_element(want.begin(), want.end()) - want.begin()) << what;
    }
  }
}

void fused_against_matmuls(BackendKind backend, bool half) {
  WhisperConfig config = toy_config();
  config.n_audio_state = config.n_text_state = 128;
  WeightSource weights = toy_weights(config);
  if (half)
    weights = [f32 = weights](const std::string& n) -> std::optional<Weight> {
      auto w = f32(n);
      if (!w || w->shape.size() != 2) return w;
      auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(w->shape[0] * w->shape[1]));
      for (size_t i = 0; i < buf->size(); ++i) (*buf)[i] = f32_to_f16(static_cast<const float*>(w->data)[i]);
      return Weight{DType::f16, w->shape, buf->data(), buf};
    };
  std::vector<std::vector<float>> outs, crosses;
  std::vector<float> mel(static_cast<size_t>(config.n_mels * 2 * config.n_audio_ctx));
  uint64_t h = 777;
  for (float& v : mel) {
    h ^= h << 13, h ^= h >> 7, h ^= h << 17;
    v = static_cast<float>(h % 20001) / 10000.0f - 1.0f;
  }
  for (bool fused : {false, true}) {
    BuildSettings bs;
    bs.fused_encoder = fused;
    auto program = build_whisper_program(config, weights, {}, bs);
    ASSERT_TRUE(program.is_ok()) << program.status().message();
    ExecutorOptions eo;
    eo.backend = backend;
    auto ex = Executor::create(*program, eo);
    ASSERT_TRUE(ex.is_ok()) << ex.status().message();
    auto out = (*ex)->run("encode", {TensorView::dense(mel.data(), DType::f32, {1, config.n_mels, 2 * config.n_audio_ctx})});
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    outs.emplace_back((*out)[0].ptr<float>(), (*out)[0].ptr<float>() + (*out)[0].numel());
    const TensorView cross = (*ex)->state("cross.kv.1");
    crosses.emplace_back(cross.ptr<float>(), cross.ptr<float>() + cross.numel());
  }
  auto view = [](std::vector<float>& v) { return TensorView::dense(v.data(), DType::f32, {static_cast<int64_t>(v.size())}); };
  // The fused encoder keeps q, k and v in f16 (what tensor cores round them to anyway): its
  // numbers agree to f16 rounding (2^-11 relative) carried through two layers. A wrong scale,
  // mask or activation moves them by percents.
  expect_equal_floats(view(outs[0]), view(outs[1]), "encoder output", 2e-3);
  expect_equal_floats(view(crosses[0]), view(crosses[1]), "last layer's cross K/V", 2e-3);
}

// The fused encoder (settings.fused_encoder) computes what the two-matmul encoder does: the
// encoder output and the cross-attention K/V it stores agree to f16 rounding on each backend. Heads
// 64 wide, as every Whisper's are (the width the GPU's flash-attention kernel takes); matrices
// in f32 (the builder folds the attention scale into the query rows) and in f16 (the attention
// applies it).
TEST_P(WhisperStreams, FusedEncoderEqualsTheMatmulEncoder) {
  for (bool half : {false, true}) {
    SCOPED_TRACE(half ? "f16 matrices" : "f32 matrices");
    fused_against_matmuls(GetParam(), half);
  }
}


// exact: every number bit for bit (the CPU); otherwise the tokens, text and times equal and the
// probabilities to rounding (Vulkan, above).
void expect_same_transcript(const Transcript& got, const Transcript& want, const std::string& what, bool exact) {
  const double tol = exact ? 0 : 1e-4;
  EXPECT_EQ(got.language, want.language) << what;
  ASSERT_EQ(got.segments.size(), want.segments.size()) << what << ": got\n" << got.text() << "\nwant\n" << want.text();
  for (size_t i = 0; i < want.segments.size(); ++i) {
    const Segment &g = got.segments[i], &w = want.segments[i];
    const std::string at = what + " segment " + std::to_string(i);
    EXPECT_EQ(g.text, w.text) << at;
    EXPECT_EQ(g.tokens, w.tokens) << at;
    EXPECT_EQ(g.start, w.start) << at;
    EXPECT_EQ(g.end, w.end) << at;
    EXPECT_NEAR(g.avg_logprob, w.avg_logprob, tol) << at;
    EXPECT_NEAR(g.no_speech_prob, w.no_speech_prob, tol) << at;
    EXPECT_EQ(g.temperature, w.temperature) << at;
    ASSERT_EQ(g.words.size(), w.words.size()) << at;
    for (size_t k = 0; k < w.words.size(); ++k) {
      EXPECT_EQ(g.words[k].text, w.words[k].text) << at << " word " << k;
      EXPECT_EQ(g.words[k].start, w.words[k].start) << at << " word " << k;
      EXPECT_EQ(g.words[k].end, w.words[k].end) << at << " word " << k;
      EXPECT_NEAR(g.words[k].probability, w.words[k].probability, tol) << at << " word " << k;
    }
  }
  EXPECT_EQ(got.stats.windows, want.stats.windows) << what;
}

TEST_P(WhisperStreams, EveryFileEqualsItsTranscriptAlone) {
  if (testing::tiny_en_model_dir().empty()) GTEST_SKIP() << "Whisper tiny.en not found (set VRUN_WHISPER_MODEL)";
  // A tiny.en window takes minutes on lavapipe: the toy model's method test above covers it.
  if (GetParam() == BackendKind::kVulkan && !runs_on_gpu(BackendKind::kAuto)) GTEST_SKIP() << "no Vulkan GPU (only a CPU implementation)";
  RunnerOptions ro;
  ro.backend = GetParam();
  ro.streams = 3;
  ro.decode_batch = 2;
  auto loaded = WhisperRunner::load(testing::tiny_en_model_dir(), ro);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  WhisperRunner& r = **loaded;
  ASSERT_EQ(r.streams(), 3);
  const bool vk = GetParam() == BackendKind::kVulkan;
  std::vector<std::string> clips = {"long_concat", "librivox_0870", "silence_10s", "espeak_fast", "librivox_0920", "goforward_raw"};
  std::vector<std::vector<float>> audio;
  for (const auto& c : clips) {
    auto a = testing::make_clip(c);
    if (!a.is_ok()) GTEST_SKIP() << a.status().message();
    audio.push_back(std::move(*a));
  }
  std::vector<std::span<const float>> spans(audio.begin(), audio.end());
  std::vector<TranscribeOptions> options(clips.size());  // the defaults: fallback, conditioning
  options[1].word_timestamps = true;
  options[2].timestamps = false;
  options[3].initial_prompt = "Speech synthesis.";
  options[4].beam_size = 2;
  options[5].timestamps = false;
  options[5].word_timestamps = true;
  std::vector<double> progress(clips.size(), 0);
  auto many = r.transcribe_many(spans, options, [&](size_t i, double s) { progress[i] = s; });
  ASSERT_EQ(many.size(), clips.size());
  for (size_t i = 0; i < clips.size(); ++i) {
    ASSERT_TRUE(many[i].is_ok()) << clips[i] << ": " << many[i].status().message();
    auto alone = r.transcribe(spans[i], options[i]);
    ASSERT_TRUE(alone.is_ok()) << alone.status().message();
    expect_same_transcript(*many[i], *alone, clips[i], !vk && blas_rows_independent());
    EXPECT_GT(progress[i], 0) << clips[i];
  }
  // One set of options for all, and a bad option failing its file alone.
  options = {TranscribeOptions{}};
  auto same = r.transcribe_many({spans[1], spans[3]}, options);
  ASSERT_EQ(same.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(same[k].is_ok()) << same[k].status().message();
    EXPECT_EQ(same[k]->text(), r.transcribe(spans[k == 0 ? 1 : 3], options[0])->text());
  }
  std::vector<TranscribeOptions> bad(2);
  bad[0].language = "de";
  auto mixed = r.transcribe_many({spans[1], spans[3]}, bad);
  EXPECT_FALSE(mixed[0].is_ok());
  EXPECT_NE(mixed[0].status().message().find("English-only"), std::string::npos) << mixed[0].status().message();
  ASSERT_TRUE(mixed[1].is_ok()) << mixed[1].status().message();
  EXPECT_EQ(mixed[1]->text(), same[1]->text());
}

INSTANTIATE_TEST_SUITE_P(Backends, WhisperStreams, ::testing::Values(BackendKind::kCpu, BackendKind::kVulkan),
                         [](const auto& info) { return info.param == BackendKind::kCpu ? std::string("Cpu") : std::string("Vulkan"); });

}  // namespace
}  // namespace vrun::whisper
