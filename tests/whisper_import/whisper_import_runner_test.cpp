// The Whisper runner on the random-weight multilingual model of tests/data/whisper_import, loaded
// from each layout through WhisperRunner::load: its language detection and its greedy window
// decode (start sequence, suppression, timestamp rules) give transformers' generate() tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/whisper/whisper_runner.h"
#include "preprocess/audio_loader.h"
#include "preprocess/whisper_mel.h"

namespace vrun::whisper {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/whisper_import";

TEST(WhisperImportRunner, EveryLayoutDecodesLikeTransformers) {
  std::ifstream in(kDir + "/goldens.json");
  const nlohmann::json g = nlohmann::json::parse(in);
  for (const char* layout : {"hf", "ct2", "ggml-random.bin"}) {
    SCOPED_TRACE(layout);
    RunnerOptions ro;
    ro.backend = BackendKind::kCpu;
    ro.threads = 2;
    ro.decode_batch = 1;
    auto r = WhisperRunner::load(kDir + "/" + layout, ro);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_TRUE((*r)->multilingual());
    for (const auto& c : g["cases"]) {
      const std::string clip = c["clip"];
      SCOPED_TRACE(clip);
      auto audio = preprocess::load_audio(std::string(VRUN_TEST_DATA) + (clip.rfind("speech_", 0) == 0 ? "/audio/" : "/whisper/") + clip + ".wav");
      ASSERT_TRUE(audio.is_ok()) << audio.status().to_string();
      auto mel = preprocess::WhisperMelSpectrogram::create({80});
      ASSERT_TRUE(mel.is_ok());
      // transformers' short-form input: the clip padded to 30 s, every frame computed.
      ASSERT_TRUE((*r)->encode(mel->stream(audio->samples).frames(0, 3000).data).is_ok());
      auto lang = (*r)->detect_language();
      ASSERT_TRUE(lang.is_ok()) << lang.status().to_string();
      EXPECT_EQ(lang->first, c["detected_language"].get<std::string>());
      TranscribeOptions o;
      o.timestamps = c["timestamps"].get<bool>();
      o.task = c["task"].get<std::string>();
      o.temperatures = {0.0};
      const std::vector<int32_t> want = c["tokens"].get<std::vector<int32_t>>();
      o.max_window_tokens = static_cast<int>(want.size());
      const std::string language = c["language"].is_null() ? lang->first : c["language"].get<std::string>();
      auto w = (*r)->decode_window(o, language);
      ASSERT_TRUE(w.is_ok()) << w.status().to_string();
      EXPECT_EQ(w->tokens, want);
    }
  }
}

}  // namespace
}  // namespace vrun::whisper
