// CTranslate2 model.bin reader: a file written here byte by byte following CTranslate2's layout
// (python/ctranslate2/specs/model_spec.py: version, spec name, revision, variables, aliases),
// then corrupted and truncated at every length.
#include <gtest/gtest.h>

#include <cstring>

#include "models/ct2/ct2_file.h"

namespace vrun::ct2 {
namespace {

class Writer {
 public:
  template <typename T>
  void put(T v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    bytes.append(p, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint16_t>(static_cast<uint16_t>(s.size() + 1));
    bytes += s;
    bytes.push_back('\0');
  }
  void var(const std::string& name, const std::vector<uint32_t>& shape, uint8_t dtype, const std::string& data) {
    str(name);
    put<uint8_t>(static_cast<uint8_t>(shape.size()));
    for (uint32_t d : shape) put(d);
    put(dtype);
    put<uint32_t>(static_cast<uint32_t>(data.size()));
    bytes += data;
  }
  std::string bytes;
};

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A small WhisperSpec-like file: f32 weights, an f16 table, an int8 weight with per-row scales,
// an int16 scalar and an alias.
std::string sample_file(uint8_t weight_dtype = 0) {
  Writer w;
  w.put<uint32_t>(6);
  w.str("WhisperSpec");
  w.put<uint32_t>(3);
  w.put<uint32_t>(5);
  w.var("decoder/num_heads", {}, 2, raw(std::vector<int16_t>{6}));
  w.var("encoder/w", {2, 3}, weight_dtype, raw(std::vector<float>{1, 2, 3, 4, 5, 6}));
  w.var("decoder/embeddings/weight", {2, 2}, 4, raw(std::vector<uint16_t>{0x3c00, 0x4000, 0xc000, 0x3800}));
  w.var("decoder/q", {2, 2}, 1, raw(std::vector<int8_t>{127, -64, 10, -127}));
  w.var("decoder/q_scale", {2}, 0, raw(std::vector<float>{127.0f, 2.0f}));
  w.put<uint32_t>(1);
  w.str("decoder/projection/weight");
  w.str("decoder/embeddings/weight");
  return w.bytes;
}

TEST(Ct2File, ReadsVariablesScalarsAndAliases) {
  auto f = File::from_bytes(sample_file(), "sample.bin");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ((*f)->binary_version(), 6u);
  EXPECT_EQ((*f)->spec(), "WhisperSpec");
  EXPECT_EQ((*f)->spec_revision(), 3u);
  ASSERT_EQ((*f)->variables().size(), 5u);
  auto heads = (*f)->scalar_int("decoder/num_heads");
  ASSERT_TRUE(heads.is_ok());
  EXPECT_EQ(*heads, 6);
  const Variable* proj = (*f)->find("decoder/projection/weight");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->name, "decoder/embeddings/weight");
  auto w = load_f32(**f, "encoder/w");
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(*w, (std::vector<float>{1, 2, 3, 4, 5, 6}));
  auto table = load_f32(**f, "decoder/projection/weight");
  ASSERT_TRUE(table.is_ok());
  EXPECT_EQ(*table, (std::vector<float>{1.0f, 2.0f, -2.0f, 0.5f}));
  EXPECT_EQ((*f)->find("nope"), nullptr);
}

TEST(Ct2File, Int8WeightsAreDequantisedWithRowScales) {
  auto f = File::from_bytes(sample_file(), "sample.bin");
  ASSERT_TRUE(f.is_ok());
  auto t = load_tensor(**f, "decoder/q");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_TRUE(t->converted);
  EXPECT_EQ(t->dtype, DType::f16);
  auto v = load_f32(**f, "decoder/q");
  ASSERT_TRUE(v.is_ok());
  // CTranslate2 stores q = round(x * scale): x = q / scale, one scale per row.
  const std::vector<float> expect = {127.0f / 127.0f, -64.0f / 127.0f, 10.0f / 2.0f, -127.0f / 2.0f};
  for (size_t i = 0; i < expect.size(); ++i) EXPECT_NEAR((*v)[i], expect[i], 1e-3f * std::abs(expect[i])) << i;
}

TEST(Ct2File, EveryTruncationIsAClearError) {
  const std::string good = sample_file();
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = File::from_bytes(good.substr(0, n), "cut.bin");
    ASSERT_FALSE(f.is_ok()) << "accepted a file cut at " << n << " of " << good.size() << " bytes";
    EXPECT_NE(f.status().message().find("cut.bin"), std::string::npos) << f.status().message();
  }
}

TEST(Ct2File, CorruptFieldsAreNamed) {
  auto bad_dtype = File::from_bytes(sample_file(9), "dtype.bin");
  ASSERT_FALSE(bad_dtype.is_ok());
  EXPECT_NE(bad_dtype.status().message().find("'encoder/w' has dtype id 9"), std::string::npos) << bad_dtype.status().message();

  // The f32 weight declared as f16: its 24 bytes contradict 6 x 2.
  auto wrong_size = File::from_bytes(sample_file(4), "size.bin");
  ASSERT_FALSE(wrong_size.is_ok());
  EXPECT_NE(wrong_size.status().message().find("'encoder/w' holds 24 bytes"), std::string::npos) << wrong_size.status().message();

  std::string alias = sample_file();
  alias[alias.size() - 3] = 'X';  // the alias target no longer names a variable
  auto a = File::from_bytes(alias, "alias.bin");
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("alias 'decoder/projection/weight'"), std::string::npos) << a.status().message();

  auto trailing = File::from_bytes(sample_file() + "zz", "trail.bin");
  ASSERT_FALSE(trailing.is_ok());
  EXPECT_NE(trailing.status().message().find("2 unexpected bytes"), std::string::npos) << trailing.status().message();

  std::string version = sample_file();
  version[0] = 42;
  auto v = File::from_bytes(version, "version.bin");
  ASSERT_FALSE(v.is_ok());
  EXPECT_NE(v.status().message().find("binary version 42"), std::string::npos) << v.status().message();

  std::string count = sample_file();
  const size_t at = 4 + 2 + 12 + 4;  // version, name length, "WhisperSpec\0", revision
  count[at + 3] = 0x7f;
  auto c = File::from_bytes(count, "count.bin");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().message().find("variables cannot fit"), std::string::npos) << c.status().message();
}

TEST(Ct2File, MissingScaleIsNamed) {
  Writer w;
  w.put<uint32_t>(6);
  w.str("WhisperSpec");
  w.put<uint32_t>(3);
  w.put<uint32_t>(1);
  w.var("encoder/q", {2}, 1, raw(std::vector<int8_t>{1, 2}));
  w.put<uint32_t>(0);
  auto f = File::from_bytes(w.bytes, "noscale.bin");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  auto t = load_tensor(**f, "encoder/q");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("no 'encoder/q_scale'"), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace vrun::ct2
