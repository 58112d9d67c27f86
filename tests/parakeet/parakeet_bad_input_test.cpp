// Bad input gives a clear error, never a crash: .nemo archives with a malicious or truncated
// pickle, a truncated archive, missing config keys, a tokenizer that does not match the joint,
// audio shorter than one frame.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "apps/parakeet/parakeet_runner.h"
#include "models/torch_ckpt/archive.h"

namespace vrun::parakeet {
namespace {

const std::string kData = std::string(VRUN_TEST_DATA) + "/parakeet";
const std::string kReaderData = VRUN_PARAKEET_TEST_DATA;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Entry {
  std::string name, data;
};

std::vector<Entry> entries_of(const std::string& path) {
  auto bytes = torch_ckpt::read_maybe_gzip(path);
  EXPECT_TRUE(bytes.is_ok());
  auto entries = torch_ckpt::read_tar(bytes->data, path);
  EXPECT_TRUE(entries.is_ok());
  std::vector<Entry> out;
  for (const auto& e : *entries) out.push_back({e.name, std::string(reinterpret_cast<const char*>(e.data.data()), e.data.size())});
  return out;
}

// A ustar archive as Python's tarfile writes one (what NeMo's save_to does).
std::string write_tar(const std::vector<Entry>& entries) {
  std::string out;
  for (const Entry& e : entries) {
    char h[512] = {};
    std::snprintf(h, 100, "./%s", e.name.c_str());
    std::snprintf(h + 100, 8, "%07o", 0644);
    std::snprintf(h + 108, 8, "%07o", 0);
    std::snprintf(h + 116, 8, "%07o", 0);
    std::snprintf(h + 124, 12, "%011llo", static_cast<unsigned long long>(e.data.size()));
    std::snprintf(h + 136, 12, "%011o", 0);
    h[156] = '0';
    std::memcpy(h + 257, "ustar\0" "00", 8);
    std::memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(h + 148, 8, "%06o", sum);
    out.append(h, 512);
    out += e.data;
    out.append((512 - e.data.size() % 512) % 512, '\0');
  }
  out.append(1024, '\0');
  return out;
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const auto p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p.string();
}

// tdt_small.nemo with one entry changed.
std::string modified_nemo(const std::string& name, const std::function<void(std::vector<Entry>&)>& change) {
  std::vector<Entry> entries = entries_of(kData + "/tdt_small.nemo");
  change(entries);
  return temp_file(name, write_tar(entries));
}

std::string& entry(std::vector<Entry>& entries, const std::string& name) {
  for (auto& e : entries)
    if (e.name == name) return e.data;
  ADD_FAILURE() << "no entry " << name;
  static std::string none;
  return none;
}

void replace(std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  s.replace(at, from.size(), to);
}

std::string load_error(const std::string& path) {
  auto r = ParakeetRunner::load(path, {BackendKind::kCpu, 1, {}});
  EXPECT_FALSE(r.is_ok()) << path;
  std::filesystem::remove(path);
  return r.is_ok() ? std::string() : r.status().message();
}

TEST(ParakeetBadInput, RewrittenArchiveStillLoads) {
  // The writer above is sound: the unchanged entries load.
  const std::string path = modified_nemo("vrun_pk_same.nemo", [](std::vector<Entry>&) {});
  auto r = ParakeetRunner::load(path, {BackendKind::kCpu, 1, {}});
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  std::filesystem::remove(path);
}

TEST(ParakeetBadInput, MaliciousPickleInsideNemo) {
  const std::string evil = read_all(kReaderData + "/evil_os_system.ckpt");
  const std::string msg = load_error(modified_nemo("vrun_pk_evil.nemo", [&](auto& e) { entry(e, "model_weights.ckpt") = evil; }));
  EXPECT_NE(msg.find("refuses global 'posix.system'"), std::string::npos) << msg;
}

TEST(ParakeetBadInput, TruncatedPickleInsideNemo) {
  const std::string msg = load_error(modified_nemo("vrun_pk_cutpkl.nemo", [&](auto& e) {
    std::string& ck = entry(e, "model_weights.ckpt");
    ck.resize(ck.size() * 2 / 3);
  }));
  EXPECT_NE(msg.find("model_weights.ckpt"), std::string::npos) << msg;
}

TEST(ParakeetBadInput, TruncatedArchive) {
  const std::string bytes = read_all(kData + "/tdt_small.nemo");
  for (size_t keep : {size_t{0}, size_t{300}, size_t{5000}, bytes.size() / 2, bytes.size() - 20000}) {
    const std::string msg = load_error(temp_file("vrun_pk_cut.nemo", bytes.substr(0, keep)));
    EXPECT_FALSE(msg.empty()) << keep;
  }
}

TEST(ParakeetBadInput, MissingConfigKey) {
  const std::string msg = load_error(modified_nemo("vrun_pk_nokey.nemo", [](auto& e) {
    replace(entry(e, "model_config.yaml"), "  d_model: 64\n", "");
  }));
  EXPECT_NE(msg.find("has no 'encoder.d_model'"), std::string::npos) << msg;
}

// Local attention is taken with a symmetric window only (NeMo's sliding-window code adds the
// position scores as if the window were [w, w]); full attention with a limited context is refused.
TEST(ParakeetBadInput, LimitedAttentionContexts) {
  std::string msg = load_error(modified_nemo("vrun_pk_asym.nemo", [](auto& e) {
    std::string& cfg = entry(e, "model_config.yaml");
    replace(cfg, "self_attention_model: rel_pos\n", "self_attention_model: rel_pos_local_attn\n");
    replace(cfg, "  att_context_size:\n  - -1\n  - -1\n", "  att_context_size:\n  - 16\n  - 8\n");
  }));
  EXPECT_NE(msg.find("att_context_size is [16, 8]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("symmetric window"), std::string::npos) << msg;
  msg = load_error(modified_nemo("vrun_pk_limited.nemo", [](auto& e) {
    replace(entry(e, "model_config.yaml"), "  att_context_size:\n  - -1\n  - -1\n", "  att_context_size:\n  - 64\n  - 0\n");
  }));
  EXPECT_NE(msg.find("att_context_size is limited"), std::string::npos) << msg;
}

TEST(ParakeetBadInput, TokenizerDoesNotMatchTheJoint) {
  const std::string msg = load_error(modified_nemo("vrun_pk_vocab.nemo", [](auto& e) {
    std::string& cfg = entry(e, "model_config.yaml");
    replace(cfg, "  vocab_size: 384\n", "  vocab_size: 383\n");
    replace(cfg, "  num_classes: 384\n", "  num_classes: 383\n");
  }));
  EXPECT_NE(msg.find("the tokenizer has 384 pieces but the model's joint has 383 tokens"), std::string::npos) << msg;
}

TEST(ParakeetBadInput, NotAModel) {
  const std::string msg = load_error(temp_file("vrun_pk_text.nemo", std::string(4096, 'x')));
  EXPECT_NE(msg.find("not a tar archive"), std::string::npos) << msg;
  EXPECT_FALSE(is_parakeet_checkpoint(kReaderData + "/tensors.ckpt"));
}

// A TDT program from before the greedy loop became one op has per-token methods instead of
// `greedy`: refused with what to do, not run into a missing-method error mid-transcription.
TEST(ParakeetBadInput, ProgramWithoutTheGreedyMethod) {
  auto program = export_parakeet(kData + "/tdt_small.nemo");
  ASSERT_TRUE(program.is_ok()) << program.status().message();
  auto& methods = (*program)->methods;
  const size_t before = methods.size();
  std::erase_if(methods, [](const MethodDef& m) { return m.name == "greedy"; });
  ASSERT_EQ(methods.size(), before - 1);
  auto r = ParakeetRunner::load(*program, {BackendKind::kCpu, 1, {}}, "old.vrp");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("old.vrp: its TDT decoder has no greedy method"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("export it again"), std::string::npos) << r.status().message();
}

TEST(ParakeetBadInput, AudioShorterThanOneFrame) {
  for (const char* model : {"tdt_small.nemo", "ctc_small.nemo"}) {
    auto r = ParakeetRunner::load(kData + "/" + model, {BackendKind::kCpu, 1, {}});
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    for (size_t n : {size_t{0}, size_t{1}, size_t{159}}) {
      std::vector<float> samples(n, 0.25f);
      auto t = (*r)->transcribe(samples);
      ASSERT_FALSE(t.is_ok()) << n;
      EXPECT_NE(t.status().message().find("shorter than one feature frame"), std::string::npos) << t.status().message();
    }
    std::vector<float> one_frame(160, 0.25f);  // exactly one frame: runs
    EXPECT_TRUE((*r)->transcribe(one_frame).is_ok());
  }
}

}  // namespace
}  // namespace vrun::parakeet
