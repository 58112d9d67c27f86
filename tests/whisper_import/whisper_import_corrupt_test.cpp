// Damaged checkpoints of each layout give an error that names the file, never a crash; plus the
// fixed tables the importers share (special-token layouts, tensor names, alignment heads).
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "models/whisper/whisper_import.h"

namespace vrun::whisper {
namespace {

namespace fs = std::filesystem;
const std::string kDir = std::string(VRUN_TEST_DATA) + "/whisper_import";

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("vrun_wimport_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// Cut points: every few bytes through the headers, then spread over the rest.
std::vector<size_t> cuts(size_t size, size_t dense_until) {
  std::vector<size_t> c;
  for (size_t i = 0; i < std::min(size, dense_until); i += 7) c.push_back(i);
  for (int k = 1; k < 24; ++k) c.push_back(size * static_cast<size_t>(k) / 24);
  c.push_back(size - 1);
  return c;
}

void expect_error(const std::string& path, const std::string& what) {
  auto r = import_whisper(path);
  ASSERT_FALSE(r.is_ok()) << what;
  EXPECT_FALSE(r.status().to_string().empty());
}

// Every cut of folder d's `file` fails to import; with the file whole again, d imports.
void expect_cuts_fail(const fs::path& d, const std::string& file, size_t dense_until, const std::string& what) {
  const std::string whole = read(d / file);
  for (size_t n : cuts(whole.size(), dense_until)) {
    write(d / file, whole.substr(0, n));
    expect_error(d.string(), what + " cut at " + std::to_string(n));
  }
  write(d / file, whole);
  ASSERT_TRUE(import_whisper(d.string()).is_ok());
}

TEST(WhisperImportCorrupt, TruncatedGgmlFiles) {
  TempDir t;
  const std::string full = read(kDir + "/ggml-random.bin");
  ASSERT_GT(full.size(), 1000u);
  const fs::path p = t.path / "ggml-cut.bin";
  for (size_t n : cuts(full.size(), 400)) {
    write(p, full.substr(0, n));
    auto r = import_whisper(p.string());
    ASSERT_FALSE(r.is_ok()) << "cut at " << n;
    if (n >= 4) {
      EXPECT_NE(r.status().to_string().find(p.string()), std::string::npos) << r.status().to_string();
    }
  }
}

TEST(WhisperImportCorrupt, DamagedGgmlHeaders) {
  TempDir t;
  const std::string full = read(kDir + "/ggml-random.bin");
  const fs::path p = t.path / "ggml-bad.bin";
  auto patch = [&](size_t at, int32_t v) {
    std::string b = full;
    std::memcpy(b.data() + at, &v, 4);
    write(p, b);
  };
  patch(4, -5);  // n_vocab
  expect_error(p.string(), "negative n_vocab");
  patch(12, 17);  // n_audio_state no longer divides into heads / equals n_text_state
  expect_error(p.string(), "bad width");
  patch(48, 1 << 30);  // mel filter rows
  expect_error(p.string(), "huge filterbank");
  // The vocabulary count sits after the filterbank: 12 ints, 2 ints, 80 x 201 floats.
  const size_t vocab_at = 4 * 12 + 8 + 4 * 80 * 201;
  patch(vocab_at, 60000);
  expect_error(p.string(), "vocabulary larger than n_vocab");
  patch(vocab_at + 4, 1 << 24);  // the first token's length
  expect_error(p.string(), "huge token");
  // Random bytes after the magic.
  std::mt19937 rng(7);
  for (int k = 0; k < 20; ++k) {
    std::string b = full.substr(0, 4);
    for (int i = 0; i < 4096; ++i) b += static_cast<char>(rng());
    write(p, b);
    expect_error(p.string(), "random bytes");
  }
}

TEST(WhisperImportCorrupt, GgmlUnknownTensorTypeIsNamed) {
  TempDir t;
  std::string b = read(kDir + "/ggml-random.bin");
  // Find the first tensor header: it follows the vocabulary; its name is encoder.conv1.weight
  // or the first state_dict entry, preceded by n_dims, name length, type and sizes.
  size_t at = b.find("encoder.conv1.weight");
  ASSERT_NE(at, std::string::npos);
  // n_dims 3: header = 3 ints + 3 sizes before the name.
  const size_t type_at = at - 4 * 3 - 4;
  int32_t type = 0;
  std::memcpy(&type, b.data() + type_at, 4);
  ASSERT_EQ(type, 1);  // f16
  const int32_t q6k = 14;
  std::memcpy(b.data() + type_at, &q6k, 4);
  const fs::path p = t.path / "ggml-q6k.bin";
  write(p, b);
  auto r = import_whisper(p.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("encoder.conv1.weight"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().to_string().find("14"), std::string::npos) << r.status().to_string();
}

TEST(WhisperImportCorrupt, DamagedHuggingFaceFolders) {
  TempDir t;
  const fs::path d = t.path / "hf";
  fs::copy(kDir + "/hf", d);
  ASSERT_NO_FATAL_FAILURE(expect_cuts_fail(d, "model.safetensors", 120, "safetensors"));

  const std::string cfg = read(d / "config.json");
  write(d / "config.json", cfg.substr(0, cfg.size() / 2));
  expect_error(d.string(), "half a config.json");
  std::string no_width = cfg;
  no_width.replace(no_width.find("\"d_model\""), 9, "\"d_mode_\"");
  write(d / "config.json", no_width);
  expect_error(d.string(), "no d_model");
  write(d / "config.json", cfg);

  const std::string gen = read(d / "generation_config.json");
  std::string wrong_lang = gen;
  const size_t en = wrong_lang.find("\"<|en|>\": 50259");
  ASSERT_NE(en, std::string::npos);
  wrong_lang.replace(en, 15, "\"<|en|>\": 50260");
  write(d / "generation_config.json", wrong_lang);
  auto r = import_whisper(d.string());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().to_string().find("lang_to_id"), std::string::npos) << r.status().to_string();
  write(d / "generation_config.json", gen);

  fs::remove(d / "tokenizer.json");
  expect_error(d.string(), "no tokenizer.json");
  fs::remove(d / "model.safetensors");
  expect_error(d.string(), "no weights");
}

TEST(WhisperImportCorrupt, DamagedCt2Folders) {
  TempDir t;
  const fs::path d = t.path / "ct2";
  fs::copy(kDir + "/ct2", d);
  ASSERT_NO_FATAL_FAILURE(expect_cuts_fail(d, "model.bin", 200, "model.bin"));
  write(d / "vocabulary.json", "[\"a\", 3]");
  expect_error(d.string(), "vocabulary with a number");
  write(d / "vocabulary.json", "[\"a\", \"b\"]");
  expect_error(d.string(), "vocabulary too short");
  fs::remove(d / "vocabulary.json");
  expect_error(d.string(), "no vocabulary");
}

TEST(WhisperImportCorrupt, NotACheckpoint) {
  TempDir t;
  EXPECT_FALSE(is_whisper_checkpoint(t.path.string()));
  expect_error(t.path.string(), "empty folder");
  expect_error((t.path / "missing.bin").string(), "no such file");
  write(t.path / "x.bin", "not a model at all");
  EXPECT_FALSE(is_whisper_checkpoint((t.path / "x.bin").string()));
  expect_error((t.path / "x.bin").string(), "text file");
  EXPECT_TRUE(is_whisper_checkpoint(kDir + "/hf"));
  EXPECT_TRUE(is_whisper_checkpoint(kDir + "/ct2"));
  EXPECT_TRUE(is_whisper_checkpoint(kDir + "/ggml-random.bin"));
}

TEST(WhisperImportTables, SpecialLayouts) {
  auto en = special_layout(51864), ml = special_layout(51865), v3 = special_layout(51866);
  ASSERT_TRUE(en.is_ok() && ml.is_ok() && v3.is_ok());
  // openai-whisper's tokenizer: tiny.en <|notimestamps|> 50362, tiny 50363, large-v3 50364.
  EXPECT_EQ(en->eot, 50256);
  EXPECT_EQ(en->notimestamps, 50362);
  EXPECT_EQ(en->n_languages, 99);
  EXPECT_EQ(ml->eot, 50257);
  EXPECT_EQ(ml->transcribe, 50359);
  EXPECT_EQ(ml->notimestamps, 50363);
  EXPECT_EQ(v3->n_languages, 100);
  EXPECT_EQ(v3->translate, 50358 + 1);
  EXPECT_EQ(v3->timestamp_begin, 50365);
  EXPECT_EQ(v3->timestamp_begin + 1501, 51866);
  EXPECT_FALSE(special_layout(32000).is_ok());
}

TEST(WhisperImportTables, TensorNames) {
  auto names = [](const std::string& c, WeightNaming n) {
    std::vector<std::string> out;
    for (const auto& p : source_parts(c, n)) out.push_back(p.name + (p.zero_if_absent ? "?" : ""));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(names("encoder/layer_3/self_attention/linear_0/bias", WeightNaming::kHuggingFace),
            (V{"model.encoder.layers.3.self_attn.q_proj.bias", "model.encoder.layers.3.self_attn.k_proj.bias?",
               "model.encoder.layers.3.self_attn.v_proj.bias"}));
  EXPECT_EQ(names("decoder/layer_1/attention/linear_1/weight", WeightNaming::kOpenAI),
            (V{"decoder.blocks.1.cross_attn.key.weight", "decoder.blocks.1.cross_attn.value.weight"}));
  EXPECT_EQ(names("decoder/layer_0/ffn/layer_norm/gamma", WeightNaming::kOpenAI), (V{"decoder.blocks.0.mlp_ln.weight"}));
  EXPECT_EQ(names("encoder/layer_norm/beta", WeightNaming::kOpenAI), (V{"encoder.ln_post.bias"}));
  EXPECT_EQ(names("decoder/embeddings/weight", WeightNaming::kHuggingFace), (V{"model.decoder.embed_tokens.weight"}));
  EXPECT_EQ(names("encoder/position_encodings/encodings", WeightNaming::kOpenAI), (V{"encoder.positional_embedding"}));
  EXPECT_TRUE(names("decoder/projection/weight", WeightNaming::kOpenAI).empty());
}

TEST(WhisperImportTables, AlignmentHeads) {
  WhisperConfig turbo;
  turbo.n_vocab = 51866;
  turbo.n_text_state = turbo.n_audio_state = 1280;
  turbo.n_audio_layer = 32;
  turbo.n_text_layer = 4;
  turbo.n_text_head = 20;
  std::string which;
  EXPECT_EQ(default_alignment_heads(turbo, &which), (std::vector<int64_t>{2, 4, 2, 11, 3, 3, 3, 6, 3, 11, 3, 14}));
  EXPECT_NE(which.find("large-v3-turbo"), std::string::npos);
  WhisperConfig odd = turbo;
  odd.n_text_layer = 3;
  odd.n_text_head = 2;
  EXPECT_EQ(default_alignment_heads(odd, &which), (std::vector<int64_t>{1, 0, 1, 1, 2, 0, 2, 1}));
}

}  // namespace
}  // namespace vrun::whisper

namespace vrun::whisper {
namespace {

// model.safetensors split in two shards with model.safetensors.index.json, as save_pretrained
// writes large checkpoints: the same bytes under every canonical name.
TEST(WhisperImportSharded, ShardsServeTheSameWeights) {
  TempDir t;
  const fs::path d = t.path / "hf";
  fs::create_directories(d);
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json"}) fs::copy(kDir + "/hf/" + f, d / f);
  const std::string st = read(kDir + "/hf/model.safetensors");
  uint64_t hlen = 0;
  std::memcpy(&hlen, st.data(), 8);
  const nlohmann::json header = nlohmann::json::parse(st.substr(8, hlen));
  const std::string data = st.substr(8 + hlen);
  nlohmann::json shard_header[2] = {nlohmann::json::object(), nlohmann::json::object()}, map = nlohmann::json::object();
  std::string shard_data[2];
  int k = 0;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    const int s = k++ % 2;
    const uint64_t b = info["data_offsets"][0], e = info["data_offsets"][1];
    nlohmann::json entry = info;
    entry["data_offsets"] = {shard_data[s].size(), shard_data[s].size() + (e - b)};
    shard_data[s] += data.substr(b, e - b);
    shard_header[s][name] = entry;
    map[name] = s == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  for (int s = 0; s < 2; ++s) {
    const std::string h = shard_header[s].dump();
    std::string file(8, '\0');
    const uint64_t n = h.size();
    std::memcpy(file.data(), &n, 8);
    write(d / (s == 0 ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors"), file + h + shard_data[s]);
  }
  write(d / "model.safetensors.index.json", nlohmann::json{{"metadata", nlohmann::json::object()}, {"weight_map", map}}.dump());
  auto sharded = import_whisper(d.string());
  auto whole = import_whisper(kDir + "/hf");
  ASSERT_TRUE(sharded.is_ok()) << sharded.status().to_string();
  ASSERT_TRUE(whole.is_ok());
  std::vector<std::string> names = {"encoder/conv1/weight", "encoder/conv2/bias", "encoder/position_encodings/encodings",
                                    "decoder/embeddings/weight", "decoder/position_encodings/encodings", "encoder/layer_norm/gamma"};
  for (const char* l : {"encoder/layer_1", "decoder/layer_0"})
    for (const char* p : {"/self_attention/linear_0/weight", "/self_attention/linear_0/bias", "/ffn/linear_1/weight", "/ffn/layer_norm/beta"})
      names.push_back(std::string(l) + p);
  names.push_back("decoder/layer_1/attention/linear_1/weight");
  for (const std::string& n : names) {
    auto a = sharded->weights(n), b = whole->weights(n);
    ASSERT_TRUE(a && b) << n;
    ASSERT_EQ(a->shape, b->shape) << n;
    int64_t count = 1;
    for (int64_t s : a->shape) count *= s;
    EXPECT_EQ(std::memcmp(a->data, b->data, static_cast<size_t>(dtype_bytes(a->dtype, count))), 0) << n;
  }
  // A shard the index names but the folder lacks.
  fs::remove(d / "model-00002-of-00002.safetensors");
  expect_error(d.string(), "missing shard");
}

}  // namespace
}  // namespace vrun::whisper
