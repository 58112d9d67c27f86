// Multilingual decoding on the random-weight multilingual Whisper of tests/data/whisper_import
// (CTranslate2 folder) against faster-whisper on the same folder (tests/data/whisper/
// multilingual_goldens.json, made by tests/reference/make_whisper_multilingual_goldens.py):
// language detection from the first window, the language and task tokens, translate, with and
// without timestamps. Random weights repeat themselves, so the first 16 tokens are compared.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/whisper/whisper_runner.h"
#include "tests/whisper/whisper_clips.h"

namespace vrun::whisper {
namespace {

TEST(WhisperMultilingual, MatchesFasterWhisper) {
  const std::string dir = std::string(VRUN_TEST_DATA) + "/whisper_import/ct2";
  if (!std::filesystem::exists(dir + "/model.bin")) GTEST_SKIP() << dir << " is missing";
  RunnerOptions ro;
  ro.backend = BackendKind::kCpu;
  auto r = WhisperRunner::load(dir, ro);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_TRUE((*r)->multilingual());
  std::ifstream in(std::string(VRUN_TEST_DATA) + "/whisper/multilingual_goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  ASSERT_GE(g["cases"].size(), 4u);
  for (const auto& c : g["cases"]) {
    auto audio = testing::make_clip(c["clip"].get<std::string>());
    if (!audio.is_ok()) GTEST_SKIP() << audio.status().message();
    ASSERT_EQ(static_cast<int64_t>(audio->size()), c["samples"].get<int64_t>());
    TranscribeOptions o;
    o.temperatures = {0.0};
    o.condition_on_previous_text = false;
    o.language = c["language"].is_null() ? "auto" : c["language"].get<std::string>();
    o.task = c["task"].get<std::string>();
    o.timestamps = c["timestamps"].get<bool>();
    const std::string what = c.dump();
    auto t = (*r)->transcribe(*audio, o);
    ASSERT_TRUE(t.is_ok()) << what << ": " << t.status().message();
    EXPECT_EQ(t->language, c["detected_language"].get<std::string>()) << what;
    std::vector<int32_t> tokens;
    for (const auto& s : t->segments) tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
    tokens.resize(std::min<size_t>(tokens.size(), 16));
    EXPECT_EQ(tokens, c["tokens"].get<std::vector<int32_t>>()) << what;
  }
}

}  // namespace
}  // namespace vrun::whisper
