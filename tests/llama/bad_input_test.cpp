// Checkpoints that are not what they claim: each load fails with a message naming the problem.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <limits>

#include "apps/llama/batch_session.h"
#include "apps/llama/llama_runner.h"
#include "models/llama/hf_llama.h"

namespace vrun::llama {
namespace {

namespace fs = std::filesystem;

std::string load_error(const std::string& path) {
  LoadOptions o;
  o.backend = BackendKind::kCpu;
  o.context = 32;
  auto r = LlamaRunner::load(path, o);
  return r.is_ok() ? std::string("<loaded>") : r.status().to_string();
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

// A copy of the tiny Llama folder to break.
std::string copy_tiny(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  fs::remove_all(dir);
  fs::copy(std::string(VRUN_TEST_DATA) + "/llama/tiny_llama", dir);
  return dir;
}

// Loading `path` fails with a message that holds each of `parts`; the message.
// The JSON header of the safetensors file f is open on (for reading and writing), read past its
// 8-byte length; f is left at the data.
std::string read_safetensors_header(std::fstream& f) {
  uint64_t n = 0;
  f.read(reinterpret_cast<char*>(&n), 8);
  std::string header(n, '\0');
  f.read(header.data(), static_cast<std::streamsize>(n));
  return header;
}

std::string expect_load_error(const std::string& path, std::initializer_list<std::string> parts) {
  const std::string e = load_error(path);
  for (const auto& part : parts) EXPECT_NE(e.find(part), std::string::npos) << e;
  return e;
}

// A copy of the tiny Llama folder (`copy`) whose config.json has `from` replaced by `to` fails to
// load with a message that holds each of `parts`.
void expect_config_edit_refused(const std::string& copy, const std::string& from, const std::string& to,
                                std::initializer_list<std::string> parts) {
  const std::string dir = copy_tiny(copy);
  std::ifstream in(dir + "/config.json");
  std::string config((std::istreambuf_iterator<char>(in)), {});
  in.close();
  const size_t at = config.find(from);
  ASSERT_NE(at, std::string::npos) << config;
  config.replace(at, from.size(), to);
  write(dir + "/config.json", config);
  expect_load_error(dir, parts);
  fs::remove_all(dir);
}

TEST(BadInput, TextFileNamedGguf) {
  const std::string path = ::testing::TempDir() + "/not_a_model.gguf";
  write(path, "this is a text file, not a GGUF model; it is long enough to pass a size check.\n");
  expect_load_error(path, {"not a GGUF file", path});
}

TEST(BadInput, TruncatedGguf) {
  // Magic, version 3, one tensor and two metadata entries promised, then the file ends inside the
  // first key.
  std::string bytes = "GGUF";
  auto u32 = [&](uint32_t v) { bytes.append(reinterpret_cast<const char*>(&v), 4); };
  auto u64 = [&](uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), 8); };
  u32(3);
  u64(1);
  u64(2);
  u64(20);
  bytes += "general.arch";
  const std::string path = ::testing::TempDir() + "/truncated.gguf";
  write(path, bytes);
  const std::string e = expect_load_error(path, {path});
  EXPECT_EQ(e.find("<loaded>"), std::string::npos);
}

TEST(BadInput, UnknownArchitecture) {
  expect_config_edit_refused("tiny_gpt2", "\"llama\"", "\"gpt2\"", {"model_type 'gpt2'", "not a Llama-family model"});
}

TEST(BadInput, SafetensorsHeaderLyingAboutOffsets) {
  const std::string dir = copy_tiny("tiny_lying");
  // Rewrite the header in place with one end offset moved far past the data (same header length).
  std::fstream f(dir + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  std::string header = read_safetensors_header(f);
  const size_t key = header.find("\"model.norm.weight\"");
  ASSERT_NE(key, std::string::npos);
  const size_t open = header.find("\"data_offsets\":[", key) + 16;
  const size_t comma = header.find(',', open);
  const size_t close = header.find(']', comma);
  std::string end = header.substr(comma + 1, close - comma - 1);
  std::string lie = "9" + std::string(end.size() - 1, '9');
  header.replace(comma + 1, end.size(), lie);
  f.seekp(8);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.close();
  expect_load_error(dir, {"model.norm.weight", "data_offsets"});
  fs::remove_all(dir);
}

TEST(BadInput, MissingWeightAndWrongShapeNameTheTensor) {
  expect_config_edit_refused("tiny_wrong_shape", "\"intermediate_size\": 128", "\"intermediate_size\": 96",
                             {"mlp.", "config.json implies"});
}

TEST(BadInput, EmptyPromptIsAnError) {
  LoadOptions o;
  o.backend = BackendKind::kCpu;
  o.context = 32;
  auto r = LlamaRunner::load(std::string(VRUN_TEST_DATA) + "/llama/tiny_llama", o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  auto g = (*r)->generate({}, GenerateOptions{}, [](const std::string&) { return true; });
  ASSERT_FALSE(g.is_ok());
  EXPECT_NE(g.status().message().find("empty"), std::string::npos);
  auto f = (*r)->feed(std::vector<int32_t>{5, 400});
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("token id 400"), std::string::npos);
}

// A checkpoint whose final norm holds NaN loads (its shapes are right), but its logits are NaN:
// feeding it is an error naming the position, not token 0 sampled for ever.
TEST(LlamaBadInput, NanLogitsAreAnError) {
  const std::string dir = copy_tiny("tiny_nan");
  const std::string st = dir + "/model.safetensors";
  std::fstream f(st, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.good());
  const std::string header = read_safetensors_header(f);
  // "model.norm.weight": {"dtype": "F32", ..., "data_offsets": [begin, end]}
  const size_t at = header.find("\"model.norm.weight\"");
  ASSERT_NE(at, std::string::npos);
  const size_t offs = header.find("data_offsets", at);
  ASSERT_NE(offs, std::string::npos);
  const uint64_t begin = std::stoull(header.substr(header.find('[', offs) + 1));
  ASSERT_NE(header.find("\"F32\"", at), std::string::npos);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.seekp(static_cast<std::streamoff>(8 + header.size() + begin));
  f.write(reinterpret_cast<const char*>(&nan), sizeof nan);
  f.close();
  LoadOptions o;
  o.backend = BackendKind::kCpu;
  o.context = 32;
  auto r = LlamaRunner::load(dir, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const std::vector<int32_t> prompt = {5, 6, 7};
  auto logits = (*r)->feed(prompt);
  ASSERT_FALSE(logits.is_ok());
  EXPECT_NE(logits.status().to_string().find("logits at position 2 are NaN"), std::string::npos) << logits.status().to_string();
  // Greedy decoding reads the device's greedy token alone (argmax with nan_flag: -1 for a row
  // holding a NaN): the same error, alone and in a batched session.
  GenerateOptions g;
  g.sampling.temperature = 0;
  g.max_tokens = 4;
  o.batch_slots = 2;
  o.batch_context = 32;
  auto fresh = LlamaRunner::load(dir, o);
  ASSERT_TRUE(fresh.is_ok()) << fresh.status().to_string();
  auto gen = (*fresh)->generate(prompt, g, [](const std::string&) { return true; });
  ASSERT_FALSE(gen.is_ok());
  EXPECT_NE(gen.status().to_string().find("logits at position 2 are NaN"), std::string::npos) << gen.status().to_string();
  auto session = BatchSession::create(**fresh);
  ASSERT_TRUE(session.is_ok()) << session.status().to_string();
  ASSERT_TRUE((*session)->add(prompt, g, [](const std::string&) { return true; }).is_ok());
  const Status stepped = (*session)->step();
  ASSERT_FALSE(stepped.is_ok());
  EXPECT_NE(stepped.to_string().find("logits at position 2 are NaN"), std::string::npos) << stepped.to_string();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace vrun::llama
