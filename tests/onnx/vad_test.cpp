// Silero VAD on vrun against onnxruntime (per-window speech probabilities) and faster-whisper's
// get_speech_timestamps (speech spans), both recorded by tests/reference/make_onnx_references.py,
// on real speech with a 60 s pause and on synthetic (espeak-ng) speech.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/backend.h"
#include "apps/common/vad/speech_spans.h"
#include "models/onnx/npy_array.h"
#include "models/onnx/silero_vad.h"
#include "preprocess/audio_loader.h"

namespace vrun {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/vad/";

std::vector<float> load(const std::string& name) {
  auto a = preprocess::load_audio(kDir + name);
  EXPECT_TRUE(a.is_ok()) << a.status().to_string();
  return a.is_ok() ? a->samples : std::vector<float>{};
}

// 7.1 s of speech, 60 s of silence, 3.3 s of speech.
std::vector<float> long_pause_audio() {
  std::vector<float> x = load("librivox_0870.wav");
  x.resize(x.size() + 60 * 16000, 0.f);
  const std::vector<float> b = load("librivox_0930.wav");
  x.insert(x.end(), b.begin(), b.end());
  return x;
}

std::vector<float> synthetic_audio() {
  return load("espeak.wav");
}

std::vector<float> floats(const std::string& npy) {
  auto t = onnx::read_npy_tensor(kDir + npy);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  if (!t.is_ok()) return {};
  const auto* f = reinterpret_cast<const float*>(t->bytes.data());
  return {f, f + t->bytes.size() / 4};
}

std::vector<vad::Span> spans_of(const std::string& npy) {
  auto t = onnx::read_npy_tensor(kDir + npy);
  EXPECT_TRUE(t.is_ok() && t->dtype == DType::i64);
  std::vector<vad::Span> s;
  const auto* v = reinterpret_cast<const int64_t*>(t->bytes.data());
  for (size_t i = 0; i + 1 < t->bytes.size() / 8; i += 2) s.push_back({v[i], v[i + 1]});
  return s;
}

void check_probabilities(const std::vector<float>& audio, const std::string& ref, BackendKind backend) {
  auto vad = onnx::SileroVad::load(kDir + "silero_vad_16k_op15.onnx", backend);
  ASSERT_TRUE(vad.is_ok()) << vad.status().to_string();
  auto p = (*vad)->probabilities(audio.data(), static_cast<int64_t>(audio.size()));
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  const std::vector<float> want = floats(ref);
  ASSERT_EQ(p->size(), want.size());
  double worst = 0;
  int speech = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>((*p)[i]) - want[i]));
    speech += want[i] >= 0.5f;
  }
  EXPECT_LE(worst, 1e-3) << ref;
  EXPECT_GT(speech, 20) << "the reference must hold speech";
  EXPECT_LT(speech, static_cast<int>(want.size())) << "and non-speech";
}

TEST(SileroVad, ProbabilitiesMatchOnnxruntimeOnRealSpeech) {
  check_probabilities(long_pause_audio(), "real.probs.npy", BackendKind::kCpu);
}

TEST(SileroVad, ProbabilitiesMatchOnnxruntimeOnSyntheticSpeech) {
  check_probabilities(synthetic_audio(), "synth.probs.npy", BackendKind::kCpu);
}

TEST(SileroVad, ProbabilitiesMatchOnnxruntimeOnVulkan) {
  if (!find_backend("vulkan")) GTEST_SKIP() << "this build has no Vulkan backend";

  check_probabilities(synthetic_audio(), "synth.probs.npy", BackendKind::kVulkan);
}

void check_spans(const std::string& probs, const std::string& spans, int64_t total) {
  const auto got = vad::speech_spans(floats(probs), total);
  const auto want = spans_of(spans);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].start, want[i].start) << "span " << i;
    EXPECT_EQ(got[i].end, want[i].end) << "span " << i;
  }
}

TEST(SpeechSpans, SameAsFasterWhispersOnRealSpeech) {
  check_spans("real.probs.npy", "real.spans.npy", static_cast<int64_t>(long_pause_audio().size()));
}

TEST(SpeechSpans, SameAsFasterWhispersOnSyntheticSpeech) {
  check_spans("synth.probs.npy", "synth.spans.npy", static_cast<int64_t>(synthetic_audio().size()));
}

TEST(SpeechSpans, SplitsOverlongSpeechAndDropsShortBursts) {
  // 16 s of speech with a 0.2 s dip at 8 s, max 10 s per span: cut at the dip, not at 10 s.
  std::vector<float> p(16 * 16000 / 512, 0.9f);
  for (int i = 250; i < 256; ++i) p[static_cast<size_t>(i)] = 0.1f;
  vad::SpanOptions o;
  o.max_speech_s = 10;
  o.speech_pad_ms = 0;
  const auto s = vad::speech_spans(p, 16 * 16000, o);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].start, 0);
  EXPECT_EQ(s[0].end, 250 * 512);
  EXPECT_EQ(s[1].start, 256 * 512);
  EXPECT_EQ(s[1].end, 16 * 16000);
  // Without a dip, 16 s of speech is cut just before 10 s.
  std::vector<float> flat(16 * 16000 / 512, 0.9f);
  const auto c = vad::speech_spans(flat, 16 * 16000, o);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_LE(c[0].end, 10 * 16000);
  EXPECT_GT(c[0].end, 9 * 16000);
  // A 100 ms burst is below min_speech (250 ms).
  std::vector<float> q(200, 0.f);  // long enough for the 2 s of silence that ends it
  q[50] = q[51] = q[52] = 0.9f;
  EXPECT_TRUE(vad::speech_spans(q, 200 * 512).empty());
}

TEST(SpeechSpans, LongPauseMapsBackToTheOriginalTime) {
  // The report: 7 s of speech, 60 s of silence, 3.3 s of speech. Transcribing only the spans, the
  // second utterance starts in the gathered audio where the first span ends plus its leading
  // padding; mapped back it must land within 0.5 s of 67.1 s.
  const std::vector<float> audio = long_pause_audio();
  auto vad = onnx::SileroVad::load(kDir + "silero_vad_16k_op15.onnx");
  ASSERT_TRUE(vad.is_ok()) << vad.status().to_string();
  auto p = (*vad)->probabilities(audio.data(), static_cast<int64_t>(audio.size()));
  ASSERT_TRUE(p.is_ok());
  const auto spans = vad::speech_spans(*p, static_cast<int64_t>(audio.size()));
  ASSERT_EQ(spans.size(), 2u);
  const vad::TimeMap map(spans, 16000);
  const std::vector<float> gathered =
      vad::gather_spans(audio.data(), static_cast<int64_t>(audio.size()), spans);
  EXPECT_LT(gathered.size(), audio.size() / 5);
  // Where speech resumes in the gathered audio: the first sample loud enough after span 1.
  const int64_t joint = spans[0].end - spans[0].start;
  int64_t onset = joint;
  while (onset < static_cast<int64_t>(gathered.size()) &&
         std::fabs(gathered[static_cast<size_t>(onset)]) < 0.02f)
    ++onset;
  const double t = map.to_original(static_cast<double>(onset) / 16000);
  EXPECT_NEAR(t, 67.1, 0.5);
  // A recogniser's segment for the second utterance that starts a little before the joint (as
  // whisper tiny.en's does, at 7.0 s of the 10.7 s gathered) still starts with that utterance.
  const double gathered_s = static_cast<double>(gathered.size()) / 16000;
  const auto [start, end] = map.to_original(static_cast<double>(joint) / 16000 - 0.28, gathered_s);
  EXPECT_NEAR(start, 67.1, 0.5);
  EXPECT_NEAR(end, static_cast<double>(audio.size()) / 16000, 0.05);
  const auto [s0, e0] = map.to_original(0.0, 7.0);
  EXPECT_NEAR(s0, 0.0, 1e-9);
  EXPECT_NEAR(e0, 7.0, 1e-9);
  // Span ends map to the end of the first utterance, not into the pause.
  EXPECT_NEAR(map.to_original(static_cast<double>(joint) / 16000, true),
              static_cast<double>(spans[0].end) / 16000, 1e-3);
  EXPECT_NEAR(map.to_original(1.0), 1.0, 1e-9);
}

}  // namespace
}  // namespace vrun
