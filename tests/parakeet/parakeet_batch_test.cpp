// transcribe_batch through encode_batch (several files' chunks in one padded encoder call, with
// frame masks) and greedy_batch (TDT: the files' greedy loops side by side) gives every file the transcript transcribe() gives it alone: the same tokens,
// words, times and segments, for TDT and CTC, whole files and chunked long audio, on the CPU and
// on Vulkan. (transcribe() itself is checked against NeMo in parakeet_goldens_test.)
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/parakeet/parakeet_runner.h"
#include "preprocess/audio_loader.h"

namespace vrun::parakeet {
namespace {

const std::string kTestData = VRUN_TEST_DATA;
const std::string kData = kTestData + "/parakeet";

std::map<std::string, std::vector<float>> clips() {
  std::ifstream in(kData + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, c] : g["clips"].items()) {
    auto a = preprocess::load_audio(kTestData + "/" + c["path"].get<std::string>());
    EXPECT_TRUE(a.is_ok()) << name;
    if (a.is_ok()) out[name] = a->samples;
  }
  return out;
}

void expect_same_transcript(const Transcript& got, const Transcript& want, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.segments.size(), want.segments.size());
  EXPECT_FALSE(want.segments.empty());
  for (size_t s = 0; s < got.segments.size(); ++s) {
    const auto &a = got.segments[s], &b = want.segments[s];
    EXPECT_EQ(a.text, b.text) << s;
    EXPECT_EQ(a.tokens, b.tokens) << s;
    EXPECT_DOUBLE_EQ(a.start, b.start) << s;
    EXPECT_DOUBLE_EQ(a.end, b.end) << s;
    ASSERT_EQ(a.words.size(), b.words.size()) << s;
    for (size_t w = 0; w < a.words.size(); ++w) {
      EXPECT_EQ(a.words[w].text, b.words[w].text);
      EXPECT_DOUBLE_EQ(a.words[w].start, b.words[w].start);
      EXPECT_DOUBLE_EQ(a.words[w].end, b.words[w].end);
    }
  }
}

// Batches of `names` (in that order) against one transcribe() per file.
void expect_batch_matches_single(ParakeetRunner& r, const std::vector<std::string>& names, const TranscribeOptions& o,
                                 int expected_windows = -1) {
  static const auto audio = clips();
  std::vector<std::span<const float>> files;
  for (const auto& n : names) files.emplace_back(audio.at(n));
  auto batch = r.transcribe_batch(files, o);
  ASSERT_TRUE(batch.is_ok()) << batch.status().message();
  ASSERT_EQ(batch->size(), names.size());
  int windows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    auto single = r.transcribe(files[i], o);
    ASSERT_TRUE(single.is_ok()) << single.status().message();
    expect_same_transcript((*batch)[i], *single, names[i]);
    EXPECT_EQ((*batch)[i].stats.windows, single->stats.windows) << names[i];
    windows += (*batch)[i].stats.windows;
  }
  if (expected_windows >= 0) {
    EXPECT_EQ(windows, expected_windows);
  }
}

std::unique_ptr<ParakeetRunner> load(const std::string& model, BackendKind backend, BuildSettings bs = {}) {
  auto r = ParakeetRunner::load(kData + "/" + model, {backend, 2, bs});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(*r) : nullptr;
}

const std::vector<std::string> kShortClips = {"librivox_0880", "librivox_0930", "synth", "espeak_slow", "espeak_fast", "short_0p62"};

TEST(ParakeetBatch, EveryClipAsAloneTdtAndCtc) {
  for (const char* model : {"tdt_small.nemo", "ctc_small.nemo"}) {
    auto r = load(model, BackendKind::kCpu);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->program().method("encode_batch") != nullptr, true);
    // Six clips of different lengths (up to 10 s): one group through the method for 64 jobs of
    // 10 s, padded to the longest.
    expect_batch_matches_single(*r, kShortClips, {}, 6);
    // TDT: the group's files decoded side by side, in one greedy_batch call.
    const bool tdt = std::string(model).starts_with("tdt");
    EXPECT_EQ(r->program().method("greedy_batch") != nullptr, tdt) << model;
    EXPECT_EQ(r->batched_calls().count("greedy_batch") ? r->batched_calls().at("greedy_batch") : 0, tdt ? 1 : 0) << model;
  }
}

// max_encoder_frames 96: the 27-s clip is 8 chunks (48 frames kept, 24 of context each side), so
// the groups of 3 jobs mix it with the short clips and split its chunks across calls; the
// decode walks from one call's frames into the next's.
// Programs of 96 encoder frames a call, and options that chunk long audio into 48 frames kept
// with 24 of context on each side.
BuildSettings short_calls(int64_t max_batch) {
  BuildSettings bs;
  bs.max_encoder_frames = 96;
  bs.max_long_frames = 0;  // no encode_long: long audio in chunks
  bs.max_batch = max_batch;
  return bs;
}
TranscribeOptions short_chunks() {
  TranscribeOptions o;
  o.chunk_frames = 48;
  o.context_frames = 24;
  return o;
}

TEST(ParakeetBatch, ChunkedLongAudioAcrossCalls) {
  const BuildSettings bs = short_calls(3);
  const TranscribeOptions o = short_chunks();
  for (const char* model : {"tdt_small.nemo", "ctc_small.nemo"}) {
    auto r = load(model, BackendKind::kCpu, bs);
    ASSERT_TRUE(r);
    expect_batch_matches_single(*r, {"synth", "long_concat", "short_0p62"}, o, 10);
    // TDT: the long clip's chunks in one group are walked one call after another, its state
    // carried from call to call and group to group; the short clips ride in other lanes.
    if (std::string(model).starts_with("tdt")) {
      EXPECT_GE(r->batched_calls().at("greedy_batch"), 8) << model;
    }
  }
}

// Batched methods for shorter jobs: max_encoder_frames 96 and max_batch 2 build encode_batch (2
// jobs of up to 96 frames) and encode_batch_48 (4 of up to 48). The 27-s clip's chunks go
// through the first, the three short clips (8 to 41 frames) together through the second.
TEST(ParakeetBatch, ShortJobsTakeTheMethodForMoreJobs) {
  const BuildSettings bs = short_calls(2);
  ASSERT_EQ(batch_shapes(bs).size(), 2u);
  EXPECT_EQ(batch_shapes(bs)[1].jobs, 4);
  EXPECT_EQ(batch_shapes(bs)[1].frames, 48);
  const TranscribeOptions o = short_chunks();
  for (const char* model : {"tdt_small.nemo", "ctc_small.nemo"}) {
    auto r = load(model, BackendKind::kCpu, bs);
    ASSERT_TRUE(r);
    ASSERT_NE(r->program().method("encode_batch_48"), nullptr);
    EXPECT_EQ(r->max_batch(), 4);
    // Shortest first: the runner reorders them (longest first) and returns them in this order.
    expect_batch_matches_single(*r, {"short_0p62", "librivox_0880", "long_concat", "librivox_0930"}, o, 11);
    const auto& calls = r->batched_calls();
    ASSERT_TRUE(calls.count("encode_batch")) << model;
    ASSERT_TRUE(calls.count("encode_batch_48")) << model;
    EXPECT_EQ(calls.at("encode_batch_48"), 1) << model;
  }
}

TEST(ParakeetBatch, VulkanAsAlone) {
  const BuildSettings bs = short_calls(3);
  // No Vulkan here (a build without it, or no device): kUnsupported, skipped.
  auto loaded = ParakeetRunner::load(kData + "/tdt_small.nemo", {BackendKind::kVulkan, 2, bs});
  if (!loaded.is_ok() && loaded.status().code() == ErrorCode::kUnsupported) GTEST_SKIP() << loaded.status().message();
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().message();
  std::unique_ptr<ParakeetRunner> r = std::move(*loaded);
  if (!r->device_description().starts_with("vulkan")) GTEST_SKIP() << r->device_description();
  expect_batch_matches_single(*r, {"librivox_0880", "short_0p62", "espeak_fast", "synth"}, short_chunks(), 4);
  // The short clips went through encode_batch_48 (6 jobs of up to 48 frames), which shares its
  // arena on the device with encode_batch.
  EXPECT_TRUE(r->batched_calls().count("encode_batch_48"));
  EXPECT_TRUE(r->batched_calls().count("greedy_batch"));
}

TEST(ParakeetBatch, ProgramWithoutEncodeBatch) {
  BuildSettings bs;
  bs.max_batch = 1;
  auto r = load("tdt_small.nemo", BackendKind::kCpu, bs);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->program().method("encode_batch"), nullptr);
  EXPECT_EQ(r->program().method("greedy_batch"), nullptr);
  expect_batch_matches_single(*r, {"synth", "short_0p62"}, {}, 2);
}

}  // namespace
}  // namespace vrun::parakeet
