// The .nemo building blocks against files torch.save, tarfile and pickle wrote themselves
// (tests/reference/make_parakeet_reader_data.py): tensor values, dtypes, views, archives, YAML,
// and the inputs that must be refused.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/parakeet/yaml_json.h"
#include "models/torch_ckpt/pickle.h"
#include "models/torch_ckpt/torch_checkpoint.h"
#include "runtime/base/dtype.h"
#include "runtime/base/mapped_file.h"

namespace vrun {
namespace {

using nlohmann::json;
using torch_ckpt::Checkpoint;

const std::string kData = VRUN_PARAKEET_TEST_DATA;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Result<Checkpoint> open_ckpt(const std::string& path) {
  VRUN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return torch_ckpt::read_torch_checkpoint({file->data(), file->size()}, file, path);
}

double element(const torch_ckpt::CkptTensor& t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  switch (t.dtype) {
    case DType::f32: {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      return v;
    }
    case DType::f16:
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p + 2 * i, 2);
      return t.dtype == DType::f16 ? f16_to_f32(h) : bf16_to_f32(h);
    }
    case DType::i64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, 8);
      return static_cast<double>(v);
    }
    default: return NAN;
  }
}

void expect_matches_torch(const Checkpoint& ck) {
  const json expected = json::parse(read_all(kData + "/readers_expected.json"));
  ASSERT_EQ(ck.tensors.size(), expected.size());
  const std::map<std::string, DType> dtypes = {{"float32", DType::f32}, {"float16", DType::f16}, {"bfloat16", DType::bf16}, {"int64", DType::i64}};
  for (const auto& [name, e] : expected.items()) {
    SCOPED_TRACE(name);
    auto it = ck.tensors.find(name);
    ASSERT_NE(it, ck.tensors.end());
    const auto& t = it->second;
    EXPECT_EQ(t.dtype, dtypes.at(e["dtype"].get<std::string>()));
    EXPECT_EQ(t.shape, e["shape"].get<std::vector<int64_t>>());
    const auto& values = e["values"];
    ASSERT_EQ(static_cast<size_t>(t.numel()), values.size());
    for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(element(t, static_cast<int64_t>(i)), values[i].get<double>()) << "element " << i;
  }
}

TEST(TorchCheckpoint, ValuesDtypesAndViewsMatchTorch) {
  auto ck = open_ckpt(kData + "/tensors.ckpt");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  expect_matches_torch(*ck);
  EXPECT_EQ(ck->order.front(), "enc.weight");  // insertion order kept
}

TEST(TorchCheckpoint, LightningStateDictWrapper) {
  auto ck = open_ckpt(kData + "/lightning.ckpt");
  ASSERT_TRUE(ck.is_ok()) << ck.status().message();
  expect_matches_torch(*ck);
}

TEST(TorchCheckpoint, RefusesOsSystemAndEval) {
  for (const auto& [file, global] : {std::pair{"evil_os_system.ckpt", "posix.system"}, std::pair{"evil_eval.ckpt", "__builtin__.eval"}}) {
    auto ck = open_ckpt(kData + "/" + file);
    ASSERT_FALSE(ck.is_ok()) << file;
    EXPECT_EQ(ck.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(ck.status().message().find(std::string("refuses global '") + global + "'"), std::string::npos) << ck.status().message();
  }
}

TEST(TorchCheckpoint, StridesAndOffsetsPastTheStorageAreErrors) {
  for (const char* file : {"bad_stride.ckpt", "bad_offset.ckpt"}) {
    auto ck = open_ckpt(kData + "/" + file);
    ASSERT_FALSE(ck.is_ok()) << file;
    EXPECT_NE(ck.status().message().find("tensor 'enc.weight'"), std::string::npos) << ck.status().message();
  }
}

TEST(TorchCheckpoint, TruncatedCheckpointsAreErrors) {
  const std::string bytes = read_all(kData + "/tensors.ckpt");
  // Every cut point from the end of the directory back into the data: an error, never a crash.
  for (size_t keep = 0; keep < bytes.size(); keep += 97) {
    auto ck = torch_ckpt::read_torch_checkpoint({reinterpret_cast<const uint8_t*>(bytes.data()), keep}, nullptr, "cut");
    EXPECT_FALSE(ck.is_ok()) << "kept " << keep << " bytes";
  }
}

TEST(Pickle, TruncatedAndUnknownOpcodes) {
  // A dict with one str -> int item, then cut before STOP.
  const uint8_t bytes[] = {0x80, 0x02, '}', 'q', 0x00, 'X', 0x01, 0x00, 0x00, 0x00, 'a', 'K', 0x05, 's', '.'};
  const std::string full(reinterpret_cast<const char*>(bytes), sizeof bytes);
  auto ok = torch_ckpt::read_pickle({reinterpret_cast<const uint8_t*>(full.data()), full.size()}, "p");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ((*ok)->dict.size(), 1u);
  EXPECT_EQ((*ok)->dict[0].first->s, "a");
  EXPECT_EQ((*ok)->dict[0].second->i, 5);
  for (size_t cut = 0; cut < full.size(); ++cut)
    EXPECT_FALSE(torch_ckpt::read_pickle({reinterpret_cast<const uint8_t*>(full.data()), cut}, "p").is_ok()) << cut;
  // INST ('i') would build an arbitrary object.
  const std::string inst = "\x80\x02(ios\nsystem\n.";
  auto r = torch_ckpt::read_pickle({reinterpret_cast<const uint8_t*>(inst.data()), inst.size()}, "p");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("refused"), std::string::npos) << r.status().message();
}

TEST(Archive, PlainAndGzipTarWithPaxNames) {
  for (const char* name : {"archive.tar", "archive.tar.gz"}) {
    SCOPED_TRACE(name);
    auto bytes = torch_ckpt::read_maybe_gzip(kData + "/" + name);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    auto entries = torch_ckpt::read_tar(bytes->data, name);
    ASSERT_TRUE(entries.is_ok()) << entries.status().message();
    ASSERT_EQ(entries->size(), 3u);
    EXPECT_EQ((*entries)[0].name, "model_config.yaml");
    EXPECT_EQ((*entries)[1].name, "model_weights.ckpt");
    EXPECT_EQ((*entries)[2].name, std::string(120, 'x') + "_long_name.txt");
    const auto& w = (*entries)[1].data;
    auto ck = torch_ckpt::read_torch_checkpoint(w, bytes->keep, "inner");
    ASSERT_TRUE(ck.is_ok()) << ck.status().message();
    expect_matches_torch(*ck);
  }
}

TEST(Archive, TruncatedTarAndGzipAreErrors) {
  for (const char* name : {"archive.tar", "archive.tar.gz"}) {
    const std::string bytes = read_all(kData + "/" + name);
    const auto tmp = std::filesystem::temp_directory_path() / (std::string("vrun_cut_") + name);
    // Cuts inside a header or inside the checkpoint's data (the plain tar holds it at 1536..4945).
    for (size_t keep : {size_t{0}, size_t{100}, size_t{700}, std::min<size_t>(2500, bytes.size() - 1), std::min<size_t>(4000, bytes.size() - 1)}) {
      {
        std::ofstream out(tmp, std::ios::binary);
        out.write(bytes.data(), static_cast<std::streamsize>(keep));
      }
      auto b = torch_ckpt::read_maybe_gzip(tmp.string());
      bool failed = !b.is_ok();
      if (!failed) {
        auto e = torch_ckpt::read_tar(b->data, tmp.string());
        failed = !e.is_ok();
        if (!failed) {  // a cut on an entry boundary: the checkpoint inside must then be incomplete
          bool ckpt_ok = false;
          for (const auto& entry : *e)
            if (entry.name == "model_weights.ckpt") ckpt_ok = torch_ckpt::read_torch_checkpoint(entry.data, b->keep, "x").is_ok();
          failed = !ckpt_ok;
        }
      }
      EXPECT_TRUE(failed) << name << " cut to " << keep;
    }
    std::filesystem::remove(tmp);
  }
}

TEST(Yaml, OmegaConfScalars) {
  auto bytes = torch_ckpt::read_maybe_gzip(kData + "/archive.tar");
  ASSERT_TRUE(bytes.is_ok());
  auto entries = torch_ckpt::read_tar(bytes->data, "archive.tar");
  ASSERT_TRUE(entries.is_ok());
  const auto& d = (*entries)[0].data;
  auto j = parakeet::parse_yaml(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()), "cfg");
  ASSERT_TRUE(j.is_ok()) << j.status().message();
  const json expected = json::parse(R"({"sample_rate": 16000, "name": "quoted: string", "list": [1, -2, 3.5],
      "nested": {"flag": true, "none": null, "tiny": 1e-05, "exp": 1e-05, "word": "it's", "empty_list": []}})");
  EXPECT_EQ(*j, expected) << j->dump();
}

TEST(Yaml, BadDocumentsAreErrors) {
  for (const char* text : {"a: [1, 2", "a: &x 1\nb: *x\n", "key: 'unterminated\n", ""}) {
    auto j = parakeet::parse_yaml(text, "cfg");
    EXPECT_FALSE(j.is_ok()) << text;
  }
}

}  // namespace
}  // namespace vrun
