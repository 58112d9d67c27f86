// `vrun export --dtype` for Whisper: which tensors convert and how close they stay (bounds of each
// type's rounding, from a float64 reading of the bytes written here), and tiny.en exported as f16
// and q8_0 still transcribing as faster-whisper does (tests/data/whisper/goldens.json).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/whisper/whisper_runner.h"
#include "models/whisper/whisper_convert.h"
#include "tests/whisper/whisper_clips.h"

namespace vrun::whisper {
namespace {

namespace fs = std::filesystem;

double half(uint16_t h) {  // IEEE binary16
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

// Element i of a converted tensor, read from its bytes by the formats' definitions.
double element(const Weight& w, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(w.data);
  uint16_t h;
  switch (w.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p + 4 * i, 4);
      return f;
    }
    case DType::f16: std::memcpy(&h, p + 2 * i, 2); return half(h);
    case DType::bf16: {
      std::memcpy(&h, p + 2 * i, 2);
      const uint32_t u = static_cast<uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::q8_0: {  // 34-byte blocks: f16 scale, 32 int8
      const uint8_t* b = p + (i / 32) * 34;
      std::memcpy(&h, b, 2);
      return half(h) * static_cast<int8_t>(b[2 + i % 32]);
    }
    default: ADD_FAILURE() << "unexpected dtype " << dtype_name(w.dtype); return 0;
  }
}

struct Stored {
  std::vector<float> values;
  std::vector<int64_t> shape;
};

class FakeCheckpoint {
 public:
  void add(const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    Stored s{std::vector<float>(static_cast<size_t>(n)), std::move(shape)};
    // Spread over several binades so relative rounding is exercised at every exponent.
    for (float& v : s.values) v = static_cast<float>(normal_(rng_) * std::exp2(static_cast<int>(rng_() % 7) - 3));
    tensors_[name] = std::move(s);
  }
  const Stored& at(const std::string& name) const { return tensors_.at(name); }
  WeightSource source() const {
    return [this](const std::string& name) -> std::optional<Weight> {
      auto it = tensors_.find(name);
      if (it == tensors_.end()) return std::nullopt;
      return Weight{DType::f32, it->second.shape, it->second.values.data(), nullptr};
    };
  }

 private:
  std::map<std::string, Stored> tensors_;
  std::mt19937 rng_{7};
  std::normal_distribution<double> normal_{0.0, 1.0};
};

const char* const kMatrix = "encoder/layer_0/self_attention/linear_0/weight";
const char* const kEmbedding = "decoder/embeddings/weight";
const char* const kNarrow = "decoder/layer_1/ffn/linear_0/weight";  // width 48: not whole q8_0 blocks
const char* const kGamma = "encoder/layer_0/ffn/layer_norm/gamma";
const char* const kConv = "encoder/conv1/weight";
const char* const kBias = "decoder/layer_0/ffn/linear_1/bias";

FakeCheckpoint fake() {
  FakeCheckpoint c;
  c.add(kMatrix, {96, 64});
  c.add(kEmbedding, {50, 64});
  c.add(kNarrow, {16, 48});
  c.add(kGamma, {64});
  c.add(kConv, {64, 80, 3});
  c.add(kBias, {64});
  return c;
}

// Largest error the type's rounding allows for element i (q8_0: half a step of its block's scale
// amax / 127, plus the scale's own f16 rounding over up to 127 steps).
double bound(DType t, const std::vector<float>& x, int64_t i) {
  const double v = std::fabs(x[static_cast<size_t>(i)]);
  switch (t) {
    case DType::f32: return 0;
    case DType::f16: return std::max(v * std::ldexp(1.0, -11), std::ldexp(1.0, -25));
    case DType::bf16: return v * std::ldexp(1.0, -8);
    default: {
      double amax = 0;
      for (int64_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(j)])));
      const double d = amax / 127;
      return d / 2 + 127 * d * std::ldexp(1.0, -11) + 1e-12;
    }
  }
}

TEST(WhisperExport, MatricesConvertWithinTheirTypesRounding) {
  const FakeCheckpoint ck = fake();
  WhisperConfig config;
  config.n_text_state = 64;
  for (DType t : {DType::f32, DType::f16, DType::bf16, DType::q8_0}) {
    std::vector<std::string> notes;
    auto src = convert_whisper_matrices(ck.source(), config, t, &notes);
    ASSERT_TRUE(src.is_ok()) << src.status().message();
    ASSERT_EQ(notes.size(), 1u);
    EXPECT_NE(notes[0].find(dtype_name(t)), std::string::npos) << notes[0];
    for (const char* name : {kMatrix, kEmbedding, kNarrow}) {
      const bool keeps = t == DType::q8_0 && std::string(name) == kNarrow;
      auto w = (*src)(name);
      ASSERT_TRUE(w.has_value()) << name;
      EXPECT_EQ(w->dtype, keeps ? DType::f32 : t) << name << " as " << dtype_name(t);
      EXPECT_EQ(w->shape, ck.at(name).shape) << name;
      const auto& x = ck.at(name).values;
      double worst = 0;
      for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
        const double e = std::fabs(element(*w, i) - x[static_cast<size_t>(i)]);
        const double b = keeps ? 0 : bound(t, x, i);
        ASSERT_LE(e, b) << name << " as " << dtype_name(t) << " element " << i << ": " << x[static_cast<size_t>(i)];
        worst = std::max(worst, e);
      }
      if (t != DType::f32 && !keeps) {
        EXPECT_GT(worst, 0) << name << ": " << dtype_name(t) << " changed nothing";
      }
    }
    for (const char* name : {kGamma, kConv, kBias}) {  // small tensors pass through untouched
      auto w = (*src)(name);
      ASSERT_TRUE(w.has_value()) << name;
      EXPECT_EQ(w->dtype, DType::f32) << name;
      EXPECT_EQ(w->data, ck.at(name).values.data()) << name;
    }
    EXPECT_FALSE((*src)("decoder/layer_9/ffn/linear_0/weight").has_value());
  }
}

TEST(WhisperExport, NamesTheTypesItTakes) {
  const FakeCheckpoint ck = fake();
  auto src = convert_whisper_matrices(ck.source(), WhisperConfig{}, DType::q4_0, nullptr);
  ASSERT_FALSE(src.is_ok());
  EXPECT_NE(src.status().message().find("q4_0"), std::string::npos) << src.status().message();
  EXPECT_NE(src.status().message().find("f32, f16, bf16 or q8_0"), std::string::npos) << src.status().message();
  for (const char* name : {"encoder/layer_3/ffn/linear_1/weight", "decoder/layer_0/attention/linear_2/weight", kEmbedding})
    EXPECT_TRUE(is_whisper_matrix(name)) << name;
  for (const char* name : {kGamma, kConv, kBias, "decoder/position_encodings/encodings", "encoder/layer_norm/gamma"})
    EXPECT_FALSE(is_whisper_matrix(name)) << name;
}

// `vrun export --batch-size 2`: the program keeps the stream methods, and files transcribed
// together from it give each file's text alone; without it a program has none.
TEST(WhisperExport, BatchSizeKeepsTheStreamMethods) {
  const std::string dir = testing::tiny_en_model_dir();
  if (dir.empty()) GTEST_SKIP() << "Whisper tiny.en not found: set VRUN_WHISPER_MODEL";
  const fs::path out = fs::temp_directory_path() / "vrun_whisper_export_streams.vrp";
  auto p = export_whisper_program(dir, DType::q8_0, nullptr, 2);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_NE((*p)->method("encode_streams"), nullptr);
  ASSERT_TRUE(write_program(**p, out.string()).is_ok());
  auto r = WhisperRunner::load(out.string(), RunnerOptions{BackendKind::kCpu, 0});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)->streams(), 2);
  std::vector<std::vector<float>> audio;
  for (const char* clip : {"librivox_0870", "espeak_fast", "librivox_0920"}) {
    auto a = testing::make_clip(clip);
    if (!a.is_ok()) GTEST_SKIP() << a.status().message();
    audio.push_back(std::move(*a));
  }
  std::vector<std::span<const float>> spans(audio.begin(), audio.end());
  auto many = (*r)->transcribe_many(spans, {TranscribeOptions{}});
  ASSERT_EQ(many.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(many[i].is_ok()) << many[i].status().message();
    EXPECT_EQ(many[i]->text(), (*r)->transcribe(spans[i], TranscribeOptions{})->text()) << i;
  }
  fs::remove(out);
  auto plain = export_whisper_program(dir, DType::q8_0, nullptr);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ((*plain)->method("encode_streams"), nullptr);
}

// tiny.en written as f16 and as q8_0: q8_0 is small enough to carry (< 60 MB) and both give
// faster-whisper's text on real and synthetic speech.
TEST(WhisperExport, TinyEnExportsTranscribeLikeFasterWhisper) {
  const std::string dir = testing::tiny_en_model_dir();
  if (dir.empty()) GTEST_SKIP() << "Whisper tiny.en not found: run tests/reference/fetch_whisper_tiny_en.sh or set VRUN_WHISPER_MODEL";
  std::ifstream in(std::string(VRUN_TEST_DATA) + "/whisper/goldens.json");
  const nlohmann::json goldens = nlohmann::json::parse(in)["clips"];
  for (DType t : {DType::f16, DType::q8_0}) {
    const fs::path out = fs::temp_directory_path() / (std::string("vrun_whisper_export_") + dtype_name(t) + ".vrp");
    std::vector<std::string> notes;
    auto p = export_whisper_program(dir, t, &notes);
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    ASSERT_TRUE(write_program(**p, out.string()).is_ok());
    if (t == DType::q8_0) {
      EXPECT_LT(fs::file_size(out), 60'000'000u) << out;
    }
    auto r = WhisperRunner::load(out.string(), RunnerOptions{BackendKind::kCpu, 0});
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    for (const char* clip : {"librivox_0870", "espeak_fast"}) {
      auto audio = testing::make_clip(clip);
      if (!audio.is_ok()) GTEST_SKIP() << audio.status().message();
      TranscribeOptions o;
      o.temperatures = {0.0};  // as the goldens were made
      o.condition_on_previous_text = false;
      auto text = (*r)->transcribe(*audio, o);
      ASSERT_TRUE(text.is_ok()) << text.status().message();
      EXPECT_EQ(text->text(), goldens[clip]["text"].get<std::string>()) << clip << " from " << dtype_name(t);
    }
    fs::remove(out);
  }
}

}  // namespace
}  // namespace vrun::whisper
