// Our tokenizers against the references' own ids on the shared corpus (see
// tests/reference/make_tokenizer_goldens.py for how each golden was made).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "apps/common/tokenizer/gguf_metadata.h"
#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/pre_tokenizer.h"
#include "apps/common/tokenizer/utf8.h"
#include "golden_data.h"

namespace vrun::tok {
namespace {

using testing::corpus;
using testing::golden_ids;
using testing::read_data;
using testing::show;

std::unique_ptr<Tokenizer> must(Result<std::unique_ptr<Tokenizer>> r) {
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

std::unique_ptr<Tokenizer> whisper() {
  return must(load_hf_tokenizer_json(read_data("whisper-tiny.en.tokenizer.json.gz"), "whisper-tiny.en.tokenizer.json"));
}

std::unique_ptr<Tokenizer> smollm2_fixture() {
  auto meta = parse_gguf_metadata(read_data("smollm2-tokenizer.gguf.gz"), "smollm2-tokenizer.gguf", nullptr);
  EXPECT_TRUE(meta.is_ok()) << meta.status().to_string();
  if (!meta.is_ok()) return nullptr;
  return must(load_tokenizer(*meta, "smollm2-tokenizer.gguf"));
}

// Encodes every corpus case and compares with the golden; reports the first few differences.
void expect_parity(const Tokenizer& tok, const std::string& golden, bool allow_special) {
  const auto cases = corpus();
  const auto want = golden_ids(golden);
  ASSERT_GE(cases.size(), 2000u);
  ASSERT_EQ(cases.size(), want.size()) << golden << " does not match corpus.txt";
  size_t mismatches = 0, tokens = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto got = tok.encode(cases[i], EncodeOptions{.allow_special = allow_special});
    tokens += want[i].size();
    if (got != want[i] && ++mismatches <= 5) {
      ADD_FAILURE() << golden << " case " << i << " '" << show(cases[i]) << "'\n  want " << show(want[i]) << "\n  got  "
                    << show(got);
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << cases.size() << " cases";
  EXPECT_GT(tokens, 20000u);  // the comparison covered real work
}

// decode(encode(x)) == x wherever the tokenizer is lossless (valid UTF-8 for byte-level BPE), and
// streaming decode gives the same string without ever emitting a broken character.
void expect_lossless_and_streaming(const Tokenizer& tok, bool allow_special) {
  size_t checked = 0;
  for (const std::string& text : corpus()) {
    const auto ids = tok.encode(text, EncodeOptions{.allow_special = allow_special});
    const std::string whole = tok.decode(ids);
    if (is_valid_utf8(text)) {
      ++checked;
      EXPECT_EQ(whole, text) << "round trip of '" << show(text) << "'";
    }
    StreamingDecoder stream(tok);
    std::string streamed;
    for (TokenId id : ids) {
      const std::string part = stream.push(id);
      EXPECT_TRUE(is_valid_utf8(part)) << "streamed piece splits a character: '" << show(part) << "'";
      streamed += part;
    }
    streamed += stream.finish();
    EXPECT_EQ(streamed, whole) << "streaming decode of '" << show(text) << "'";
  }
  EXPECT_GT(checked, 2000u);
}

TEST(WhisperTokenizerJson, MatchesHuggingFaceTokenizers) { expect_parity(*whisper(), "whisper.ids.gz", true); }

TEST(WhisperTokenizerJson, SpecialTokensAsTextMatchEncodeSpecialTokens) {
  expect_parity(*whisper(), "whisper.nospecial.ids.gz", false);
}

TEST(WhisperTokenizerJson, LosslessAndStreaming) { expect_lossless_and_streaming(*whisper(), true); }

// Llama-3 / Qwen2 style tokenizer.json: Sequence[Split(Qwen2 regex), ByteLevel(use_regex=false)]
// with ignore_merges, on the Whisper vocabulary; the same edit the golden script makes.
TEST(WhisperTokenizerJson, SplitSequenceAndIgnoreMergesMatchHuggingFace) {
  auto j = nlohmann::json::parse(read_data("whisper-tiny.en.tokenizer.json.gz"));
  nlohmann::json split = {{"type", "Split"}, {"behavior", "Isolated"}, {"invert", false}};
  split["pattern"]["Regex"] = kQwen2Pattern;
  nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  j["pre_tokenizer"] = {{"type", "Sequence"}};
  j["pre_tokenizer"]["pretokenizers"] = nlohmann::json::array({split, byte_level});
  j["model"]["ignore_merges"] = true;
  auto tok = must(load_hf_tokenizer_json(j.dump(), "whisper-split-qwen2.json"));
  ASSERT_NE(tok, nullptr);
  expect_parity(*tok, "whisper_split_qwen2.ids.gz", true);
}

TEST(WhisperTokenizerJson, SpecialIds) {
  auto tok = whisper();
  EXPECT_EQ(tok->special_ids().eos, 50256);
  EXPECT_EQ(tok->special_ids().bos, 50257);
  EXPECT_EQ(tok->piece_to_id("<|notimestamps|>").value_or(-1), 50362);
  EXPECT_EQ(tok->encode("<|startoftranscript|><|en|>"), (std::vector<TokenId>{50257, 50258}));
}

TEST(SmolLM2Gguf, MatchesLlamaCpp) { expect_parity(*smollm2_fixture(), "smollm2.ids.gz", true); }

TEST(SmolLM2Gguf, ParseSpecialFalseMatchesLlamaCpp) { expect_parity(*smollm2_fixture(), "smollm2.nospecial.ids.gz", false); }

TEST(SmolLM2Gguf, LosslessAndStreaming) { expect_lossless_and_streaming(*smollm2_fixture(), false); }

TEST(SmolLM2Gguf, RealFileMatchesLlamaCpp) {
  // The file scripts/fetch-models.sh (which scripts/test.sh runs) puts in the model cache, unless
  // VRUN_SMOLLM2_GGUF names another; the reference venv's copy otherwise.
  std::string path;
  const char* env = std::getenv("VRUN_SMOLLM2_GGUF");
  const char* home = std::getenv("HOME");
  for (const std::string& c : {std::string(env ? env : ""),
                               home ? std::string(home) + "/.cache/vrun/models/SmolLM2-135M-Instruct.Q4_1.gguf" : "",
                               std::string("/tmp/vrun-tok-venv/models/smollm2.gguf")})
    if (!c.empty() && std::filesystem::exists(c)) {
      path = c;
      break;
    }
  if (path.empty())
    GTEST_SKIP() << "SmolLM2's GGUF not found (set VRUN_SMOLLM2_GGUF, or run scripts/fetch-models.sh smollm2)";
  auto tok = must(load_tokenizer_file(path));
  ASSERT_NE(tok, nullptr);
  expect_parity(*tok, "smollm2.ids.gz", true);
  EXPECT_EQ(tok->special_ids().bos, 1);
  EXPECT_EQ(tok->special_ids().eos, 2);
}

// A tiktoken rank file holding the Whisper (GPT-2) byte vocabulary with ranks = ids; the reference
// is tiktoken with the same ranks and Llama-3's pattern.
TEST(TiktokenRanks, MatchesTiktoken) {
  auto json = whisper();
  ASSERT_NE(json, nullptr);
  std::string ranks;
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (TokenId id = 0; id < 50256; ++id) {
    std::string bytes;
    json->append_token_bytes(id, false, false, bytes);
    std::string enc;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
      if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
      if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
      enc += b64[(v >> 18) & 63];
      enc += b64[(v >> 12) & 63];
      enc += i + 1 < bytes.size() ? b64[(v >> 6) & 63] : '=';
      enc += i + 2 < bytes.size() ? b64[v & 63] : '=';
    }
    ranks += enc + " " + std::to_string(id) + "\n";
  }
  auto tok = must(load_tiktoken_ranks(ranks, "whisper-ranks.tiktoken"));
  ASSERT_NE(tok, nullptr);
  expect_parity(*tok, "tiktoken_whisper_ranks.ids.gz", true);
  expect_lossless_and_streaming(*tok, true);
}

void expect_sentencepiece(const std::string& name) {
  auto tok = must(load_sentencepiece(read_data(name + ".model"), name + ".model"));
  ASSERT_NE(tok, nullptr);
  expect_parity(*tok, name + ".ids.gz", true);
  // Our piece-by-piece decode against sentencepiece's own decode of the same ids, whole and streamed.
  const auto ids = golden_ids(name + ".ids.gz");
  const auto want = testing::split_lines(read_data(name + ".decoded.txt.gz"));
  ASSERT_EQ(ids.size(), want.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string expected = testing::unescape(want[i]);
    const std::string got = tok->decode(ids[i]);
    StreamingDecoder stream(*tok);
    std::string streamed;
    for (TokenId id : ids[i]) streamed += stream.push(id);
    streamed += stream.finish();
    if ((got != expected || streamed != expected) && ++mismatches <= 5) {
      ADD_FAILURE() << name << " decode of case " << i << " " << show(ids[i]) << "\n  want '" << show(expected)
                    << "'\n  got  '" << show(got) << "'\n  streamed '" << show(streamed) << "'";
    }
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(SentencePiece, BpeMatchesSentencepiece) { expect_sentencepiece("spm_bpe"); }
TEST(SentencePiece, UnigramMatchesSentencepiece) { expect_sentencepiece("spm_unigram"); }

}  // namespace
}  // namespace vrun::tok
