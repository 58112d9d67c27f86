// Chat formats, streaming edge cases, the .vrp metadata adapter and the errors malformed input gets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "apps/common/tokenizer/chat_template.h"
#include "apps/common/tokenizer/gguf_metadata.h"
#include "apps/common/tokenizer/loaders.h"
#include "apps/common/tokenizer/program_metadata.h"
#include "apps/common/tokenizer/utf8.h"
#include "runtime/program_file.h"
#include "golden_data.h"

namespace vrun::tok {
namespace {

using testing::read_data;

std::unique_ptr<Tokenizer> whisper() {
  auto r = load_hf_tokenizer_json(read_data("whisper-tiny.en.tokenizer.json.gz"), "whisper-tiny.en.tokenizer.json");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return r.is_ok() ? std::move(r).value() : nullptr;
}

MetadataMap smollm2_metadata() {
  auto meta = parse_gguf_metadata(read_data("smollm2-tokenizer.gguf.gz"), "smollm2-tokenizer.gguf", nullptr);
  EXPECT_TRUE(meta.is_ok()) << meta.status().to_string();
  return meta.is_ok() ? std::move(meta).value() : MetadataMap();
}

// SmolLM2's own Jinja template, rendered by jinja2, against our ChatML rendering.
TEST(ChatTemplate, ChatMLMatchesSmolLM2JinjaRendering) {
  const auto j = nlohmann::json::parse(read_data("chat_smollm2.json"));
  auto tok = load_tokenizer(smollm2_metadata(), "smollm2-tokenizer.gguf");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const std::string source = j["template"];
  const ChatFormat format = detect_chat_format(source, **tok);
  EXPECT_EQ(format.kind, ChatFormat::Kind::kChatML);
  ASSERT_EQ(j["cases"].size(), 6u);
  for (const auto& c : j["cases"]) {
    std::vector<ChatMessage> messages;
    for (const auto& m : c["messages"]) messages.push_back({m["role"], m["content"]});
    EXPECT_EQ(render_chat(format, messages, c["add_generation_prompt"]), c["rendered"].get<std::string>());
  }
}

// The formats as Meta documents them (llama-models prompt format pages).
TEST(ChatTemplate, Llama3AndLlama2Formats) {
  const std::vector<ChatMessage> conv = {{"system", "You are helpful."}, {"user", "Hi there"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  EXPECT_EQ(render_chat({ChatFormat::Kind::kLlama3, {}}, conv, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render_chat({ChatFormat::Kind::kLlama2, {}}, conv, true),
            "<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] Bye [/INST]");
  EXPECT_EQ(render_chat({ChatFormat::Kind::kRaw, {}}, conv, true), "You are helpful.Hi thereHello!Bye");
  EXPECT_FALSE(parse_chat_format("mistral").is_ok());
  EXPECT_FALSE(parse_chat_format("auto")->has_value());
}

TEST(Streaming, HoldsBackUnfinishedCharacters) {
  auto tok = whisper();
  ASSERT_NE(tok, nullptr);
  const std::string text = "a😀b";
  const auto ids = tok->encode(text);
  ASSERT_GE(ids.size(), 3u);  // the emoji is split into byte-level tokens
  StreamingDecoder stream(*tok);
  std::vector<std::string> parts;
  for (TokenId id : ids) parts.push_back(stream.push(id));
  parts.push_back(stream.finish());
  std::string joined;
  for (const auto& p : parts) {
    EXPECT_TRUE(is_valid_utf8(p));
    joined += p;
  }
  EXPECT_EQ(joined, text);
  EXPECT_EQ(parts.front(), "a");
  // An unfinished character at the end becomes U+FFFD, as whole decoding does.
  const auto emoji = tok->encode("😀");
  StreamingDecoder cut(*tok);
  std::string partial = cut.push(emoji[0]);
  partial += cut.finish();
  EXPECT_EQ(partial, tok->decode(std::vector<TokenId>{emoji[0]}));
  EXPECT_EQ(partial, "\xEF\xBF\xBD");
}

// A program through the runtime's own serializer and loader (`name` in messages), and the tokenizer
// its metadata gives.
struct RoundTrip {
  std::vector<uint8_t> bytes;
  std::shared_ptr<Program> program;
  std::unique_ptr<Tokenizer> tokenizer;
};
void round_trip(const Program& p, const std::string& name, RoundTrip* out) {
  auto bytes = serialize_program(p, /*verify=*/false);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  out->bytes = std::move(*bytes);
  auto loaded = load_program_from_memory(out->bytes.data(), out->bytes.size(), name);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  out->program = *loaded;
  auto tok = load_tokenizer(ProgramMetadataView(*out->program), name);
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  out->tokenizer = std::move(*tok);
}

// The tokenizer gives the reference's ids (golden file `ids`) for every case of the corpus.
void expect_golden_ids(const Tokenizer& tok, const char* ids) {
  const auto cases = testing::corpus();
  const auto want = testing::golden_ids(ids);
  ASSERT_EQ(cases.size(), want.size());
  for (size_t i = 0; i < cases.size(); ++i) ASSERT_EQ(tok.encode(cases[i]), want[i]) << "case " << i;
}

// Tokenizers stored in a program's metadata map go through the runtime's own serializer and
// loader, then must give the references' ids.
TEST(ProgramMetadata, TokenizersSurviveAProgramRoundTrip) {
  Program p;
  p.version = kProgramFormatVersion;
  p.metadata[keys::kKind] = MetaValue::str("hf_json");
  p.metadata[keys::kHfJson] = MetaValue::bytes(read_data("whisper-tiny.en.tokenizer.json.gz"));
  RoundTrip whisper;
  ASSERT_NO_FATAL_FAILURE(round_trip(p, "whisper.vrp", &whisper));
  ASSERT_NO_FATAL_FAILURE(expect_golden_ids(*whisper.tokenizer, "whisper.ids.gz"));

  // GGUF keys copied verbatim into a program.
  Program g;
  g.version = kProgramFormatVersion;
  const MetadataMap meta = smollm2_metadata();
  for (const char* key : {keys::kGgmlModel, keys::kGgmlPre}) g.metadata[key] = MetaValue::str(std::string(*meta.get_string(key)));
  for (const char* key : {keys::kGgmlTokens, keys::kGgmlMerges}) g.metadata[key] = MetaValue::string_list(*meta.get_strings(key));
  g.metadata[keys::kGgmlTokenType] = MetaValue::int_list(*meta.get_ints(keys::kGgmlTokenType));
  for (const char* key : {keys::kGgmlBos, keys::kGgmlEos}) g.metadata[key] = MetaValue::integer(*meta.get_int(key));
  RoundTrip smollm2;
  ASSERT_NO_FATAL_FAILURE(round_trip(g, "smollm2.vrp", &smollm2));
  ASSERT_NO_FATAL_FAILURE(expect_golden_ids(*smollm2.tokenizer, "smollm2.ids.gz"));
  EXPECT_EQ(smollm2.tokenizer->special_ids().eos, 2);
}

void expect_error(const Status& s, std::initializer_list<const char*> parts) {
  EXPECT_FALSE(s.is_ok());
  for (const char* part : parts) EXPECT_NE(s.message().find(part), std::string::npos) << "'" << part << "' not in: " << s.message();
}

TEST(Errors, MalformedInputsAreNamed) {
  const std::string gguf = read_data("smollm2-tokenizer.gguf.gz");
  for (size_t cut : {size_t{3}, size_t{30}, gguf.size() / 2, gguf.size() - 1}) {
    bool more = false;
    auto r = parse_gguf_metadata(std::string_view(gguf).substr(0, cut), "cut.gguf", &more);
    expect_error(r.status(), {"cut.gguf", "ends inside"});
    EXPECT_TRUE(more);
  }
  MetadataMap meta = smollm2_metadata();
  meta.set(keys::kGgmlPre, std::string("made-up-pre"));
  expect_error(load_tokenizer(meta, "m.gguf").status(), {"m.gguf", "made-up-pre", "not supported"});
  meta.set(keys::kGgmlPre, std::string("smollm"));
  meta.set(keys::kGgmlMerges, std::vector<std::string>{"Ġ t", "zzzq qqq"});
  expect_error(load_tokenizer(meta, "m.gguf").status(), {"m.gguf", "merge 1", "missing"});
  meta.set(keys::kGgmlModel, std::string("llama"));
  expect_error(load_tokenizer(meta, "m.gguf").status(), {"m.gguf", "'llama'"});

  expect_error(load_hf_tokenizer_json("{not json", "t.json").status(), {"t.json", "not valid JSON"});
  expect_error(load_hf_tokenizer_json(R"({"model": {"type": "WordPiece"}, "normalizer": null})", "t.json").status(),
               {"t.json", "WordPiece"});
  expect_error(load_hf_tokenizer_json(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": null,
      "added_tokens": [], "pre_tokenizer": {"type": "Whitespace"}})", "t.json").status(), {"t.json", "Whitespace"});
  expect_error(load_tiktoken_ranks("IQ== 0\n!!! 1\n", "r.tiktoken").status(), {"r.tiktoken", "line 2"});
  expect_error(load_sentencepiece("definitely not a proto", "x.model").status(), {"x.model", "SentencePiece"});
  expect_error(load_tokenizer(MetadataMap(), "empty.vrp").status(), {"empty.vrp", "no tokenizer"});
}

}  // namespace
}  // namespace vrun::tok
