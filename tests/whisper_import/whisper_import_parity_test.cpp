// One random-weight multilingual Whisper in three layouts (tests/data/whisper_import, made by
// tests/reference/make_whisper_random.py: saved by transformers, converted by CTranslate2's own
// converter, written in whisper.cpp's ggml layout). Each layout must give transformers' own
// generate() tokens (greedy; language forced and detected; with and without timestamps), the
// layouts must agree with each other to the last logit, and the tokenizers vrun builds for the
// layouts that carry no tokenizer.json must equal the one transformers saved.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "apps/common/tokenizer/loaders.h"
#include "models/whisper/whisper_import.h"
#include "preprocess/audio_loader.h"
#include "preprocess/whisper_mel.h"
#include "runtime/executor.h"

namespace vrun::whisper {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/whisper_import";
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

nlohmann::json goldens() {
  std::ifstream in(kDir + "/goldens.json");
  return nlohmann::json::parse(in);
}

std::string clip_path(const std::string& clip) {
  return std::string(VRUN_TEST_DATA) + (clip.rfind("speech_", 0) == 0 ? "/audio/" : "/whisper/") + clip + ".wav";
}

// A layout loaded and ready to run: the program's encode/decode methods, driven directly.
struct Loaded {
  ImportedWhisper imported;
  std::shared_ptr<Program> program;
  std::unique_ptr<Executor> exec;
  SpecialLayout s;
  std::vector<int32_t> suppress, suppress_begin;

  void encode(const std::vector<float>& mel) {
    auto out = exec->run("encode", {TensorView::dense(const_cast<float*>(mel.data()), DType::f32, {1, imported.config.n_mels, 3000})});
    ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  }
  std::vector<float> step(std::vector<int32_t> tokens, int64_t pos) {
    std::vector<int32_t> positions(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) positions[i] = static_cast<int32_t>(pos + static_cast<int64_t>(i));
    const int64_t n = static_cast<int64_t>(tokens.size());
    auto out = exec->run("decode", {TensorView::dense(tokens.data(), DType::i32, {1, n}), TensorView::dense(positions.data(), DType::i32, {1, n})},
                         {{"pos", pos}});
    EXPECT_TRUE(out.is_ok()) << out.status().to_string();
    if (!out.is_ok()) return {};
    const float* p = (*out)[0].ptr<float>();
    return std::vector<float>(p, p + imported.config.n_vocab);
  }
};

Loaded load(const std::string& path) {
  Loaded l;
  auto m = import_whisper(path);
  EXPECT_TRUE(m.is_ok()) << path << ": " << m.status().to_string();
  if (!m.is_ok()) return l;
  l.imported = std::move(*m);
  auto p = build_whisper_program(l.imported.config, l.imported.weights, l.imported.extras);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  if (!p.is_ok()) return l;
  l.program = *p;
  ExecutorOptions eo;
  eo.backend = BackendKind::kCpu;
  eo.threads = 2;
  auto e = Executor::create(l.program, eo);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (e.is_ok()) l.exec = std::move(*e);
  l.s = *special_layout(l.imported.config.n_vocab);
  for (int64_t t : l.imported.extras.suppress_tokens) l.suppress.push_back(static_cast<int32_t>(t));
  // The special tokens openai-whisper and transformers never sample.
  for (int64_t t : {l.s.translate, l.s.transcribe, l.s.sot, l.s.startofprev, l.s.startoflm, l.s.nospeech})
    l.suppress.push_back(static_cast<int32_t>(t));
  for (int64_t t : l.imported.extras.suppress_begin) l.suppress_begin.push_back(static_cast<int32_t>(t));
  return l;
}

std::vector<float> mel_of(const std::string& clip) {
  auto audio = preprocess::load_audio(clip_path(clip));
  EXPECT_TRUE(audio.is_ok()) << audio.status().to_string();
  if (!audio.is_ok()) return {};
  auto mel = preprocess::WhisperMelSpectrogram::create({80});
  // transformers' feature extractor: the clip padded to 30 s, all 3000 frames real.
  return mel->stream(audio->samples).frames(0, 3000).data;
}

double logsumexp(const std::vector<double>& v) {
  double m = -std::numeric_limits<double>::infinity(), s = 0;
  for (double x : v) m = std::max(m, x);
  if (!std::isfinite(m)) return m;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// transformers' SuppressTokens, SuppressTokensAtBegin and WhisperTimeStampLogitsProcessor (with
// max_initial_timestamp_index 50), then argmax.
int32_t pick(const Loaded& l, std::vector<float> logits, const std::vector<int32_t>& sampled, bool timestamps) {
  const int32_t n = static_cast<int32_t>(logits.size()), tb = static_cast<int32_t>(l.s.timestamp_begin),
                eot = static_cast<int32_t>(l.s.eot);
  auto off = [&](int32_t a, int32_t b) {
    for (int32_t i = std::max(a, 0); i < std::min(b, n); ++i) logits[static_cast<size_t>(i)] = kNegInf;
  };
  for (int32_t t : l.suppress) off(t, t + 1);
  if (sampled.empty())
    for (int32_t t : l.suppress_begin) off(t, t + 1);
  if (timestamps) {
    off(static_cast<int32_t>(l.s.notimestamps), static_cast<int32_t>(l.s.notimestamps) + 1);
    const bool last_ts = !sampled.empty() && sampled.back() >= tb;
    const bool penult_ts = sampled.size() < 2 || sampled[sampled.size() - 2] >= tb;
    if (last_ts) {
      if (penult_ts) off(tb, n);
      else off(0, eot);
    }
    for (auto it = sampled.rbegin(); it != sampled.rend(); ++it)
      if (*it >= tb) {
        off(tb, last_ts && !penult_ts ? *it : *it + 1);
        break;
      }
    if (sampled.empty()) {
      off(0, tb);
      off(tb + 50 + 1, n);
    }
    std::vector<double> lp(logits.begin(), logits.end());
    const double lse = logsumexp(lp);
    for (double& x : lp) x -= lse;
    const double ts = logsumexp(std::vector<double>(lp.begin() + tb, lp.end()));
    const double text = *std::max_element(lp.begin(), lp.begin() + tb);
    if (ts > text) off(0, tb);
  }
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

const char* kLayouts[] = {"hf", "ct2", "ggml-random.bin"};

TEST(WhisperImport, EveryLayoutGivesTransformersGenerateTokens) {
  const nlohmann::json g = goldens();
  std::map<std::string, std::vector<float>> mels;
  for (const char* layout : kLayouts) {
    SCOPED_TRACE(layout);
    Loaded l = load(kDir + "/" + layout);
    ASSERT_TRUE(l.exec);
    EXPECT_EQ(l.imported.config.n_vocab, 51865);
    EXPECT_EQ(l.imported.config.n_text_state, 16);
    EXPECT_EQ(l.imported.config.n_audio_layer, 2);
    for (const auto& c : g["cases"]) {
      const std::string clip = c["clip"];
      SCOPED_TRACE(clip + (c["timestamps"].get<bool>() ? " timestamps" : " text"));
      if (!mels.count(clip)) mels[clip] = mel_of(clip);
      l.encode(mels[clip]);
      std::vector<int32_t> prompt = c["prompt"].get<std::vector<int32_t>>();
      // Language detection: the most likely language token after <|startoftranscript|>.
      std::vector<float> first = l.step({static_cast<int32_t>(l.s.sot)}, 0);
      ASSERT_FALSE(first.empty());
      auto lang_begin = first.begin() + l.s.sot + 1;
      const int64_t detected = std::max_element(lang_begin, lang_begin + l.s.n_languages) - lang_begin;
      EXPECT_EQ(whisper_language_codes()[static_cast<size_t>(detected)], c["detected_language"].get<std::string>());
      // The rest of the start sequence in one call, then one token at a time.
      std::vector<float> logits = l.step(std::vector<int32_t>(prompt.begin() + 1, prompt.end()), 1);
      int64_t pos = static_cast<int64_t>(prompt.size());
      std::vector<int32_t> sampled;
      const std::vector<int32_t> want = c["tokens"].get<std::vector<int32_t>>();
      while (sampled.size() < want.size()) {
        const int32_t t = pick(l, logits, sampled, c["timestamps"].get<bool>());
        sampled.push_back(t);
        if (t == l.s.eot) break;
        logits = l.step({t}, pos++);
      }
      EXPECT_EQ(sampled, want);
    }
  }
}

TEST(WhisperImport, LayoutsAgreeOnEveryLogit) {
  const std::vector<float> mel = mel_of("espeak_fast");
  std::vector<std::vector<float>> out;
  for (const char* layout : kLayouts) {
    Loaded l = load(kDir + "/" + layout);
    ASSERT_TRUE(l.exec);
    l.encode(mel);
    out.push_back(l.step({50258, 50259, 50359, 50363, 1012, 2252}, 0));
  }
  for (size_t k = 1; k < out.size(); ++k) {
    ASSERT_EQ(out[k].size(), out[0].size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < out[0].size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(out[k][i]) - out[0][i]));
      scale = std::max(scale, std::fabs(static_cast<double>(out[0][i])));
    }
    EXPECT_GT(scale, 1.0);  // real logits, not zeros
    EXPECT_LE(worst, 1e-4 * scale) << kLayouts[k] << " vs hf";
  }
}

TEST(WhisperImport, BuiltTokenizersEqualTransformersTokenizer) {
  auto hf = import_whisper(kDir + "/hf");
  auto ct2 = import_whisper(kDir + "/ct2");
  auto ggml = import_whisper(kDir + "/ggml-random.bin");
  ASSERT_TRUE(hf.is_ok() && ct2.is_ok() && ggml.is_ok());
  auto ref = tok::load_hf_tokenizer_json(hf->extras.tokenizer_json, "hf");
  ASSERT_TRUE(ref.is_ok()) << ref.status().to_string();
  const std::vector<std::string> texts = {" Hello world, this is Whisper.", "Grüße aus München! 你好，世界。 Привет",
                                          "  numbers 12345 and    spaces\n", "«quotes» — dashes ♪♪ <<>>"};
  const nlohmann::json g = goldens();
  for (auto* m : {&*ct2, &*ggml}) {
    auto t = tok::load_hf_tokenizer_json(m->extras.tokenizer_json, "built");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    for (int32_t id = 0; id < 51865; ++id) {
      ASSERT_EQ((*t)->id_to_piece(id), (*ref)->id_to_piece(id)) << "id " << id;
      ASSERT_EQ((*t)->is_special(id), (*ref)->is_special(id)) << "id " << id;
      if (id % 61 == 0) {
        ASSERT_EQ((*t)->decode(std::vector<int32_t>{id}), (*ref)->decode(std::vector<int32_t>{id})) << "id " << id;
      }
    }
    for (const std::string& s : texts) EXPECT_EQ((*t)->encode(s, {}), (*ref)->encode(s, {})) << s;
    for (const char* piece : {"<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|su|>", "<|translate|>", "<|transcribe|>",
                              "<|notimestamps|>", "<|0.00|>", "<|30.00|>"})
      EXPECT_EQ((*t)->piece_to_id(piece), (*ref)->piece_to_id(piece)) << piece;
  }
  // transformers' own decode of the text-only goldens.
  for (const auto& c : g["cases"])
    if (!c["timestamps"].get<bool>()) {
      EXPECT_EQ((*ref)->decode(c["tokens"].get<std::vector<int32_t>>()), c["text"].get<std::string>());
    }
}

TEST(WhisperImport, ExtrasFromEachLayout) {
  auto hf = import_whisper(kDir + "/hf");
  auto ct2 = import_whisper(kDir + "/ct2");
  auto ggml = import_whisper(kDir + "/ggml-random.bin");
  ASSERT_TRUE(hf.is_ok() && ct2.is_ok() && ggml.is_ok());
  const std::vector<int64_t> heads = {1, 0, 1, 1};
  EXPECT_EQ(hf->extras.alignment_heads, heads);
  EXPECT_EQ(ct2->extras.alignment_heads, heads);
  EXPECT_EQ(ggml->extras.alignment_heads, heads);  // openai-whisper's default for unknown sizes
  EXPECT_EQ(hf->extras.suppress_begin, (std::vector<int64_t>{220, 50257}));
  EXPECT_EQ(ct2->extras.suppress_begin, hf->extras.suppress_begin);
  EXPECT_EQ(ggml->extras.suppress_begin, hf->extras.suppress_begin);
  EXPECT_EQ(ct2->extras.suppress_tokens, hf->extras.suppress_tokens);
  // The ggml file has no config: the non-speech tokens derived from its vocabulary must be the
  // published list, less the special tokens that list also names.
  std::vector<int64_t> published;
  for (int64_t t : hf->extras.suppress_tokens)
    if (t < 50257) published.push_back(t);
  EXPECT_EQ(ggml->extras.suppress_tokens, published);
  EXPECT_TRUE(hf->notes.empty());
  ASSERT_FALSE(ggml->notes.empty());
}

}  // namespace
}  // namespace vrun::whisper
