// The safetensors reader on hand-made files: a valid one, and headers that lie.
#include <gtest/gtest.h>

#include <cstring>

#include "models/safetensors/safetensors_file.h"

namespace vrun::safetensors {
namespace {

std::string make_file(const std::string& header, size_t data_bytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>(n >> (8 * i) & 0xff);
  out += header;
  for (size_t i = 0; i < data_bytes; ++i) out.push_back(static_cast<char>(i));
  return out;
}

std::string error_of(const std::string& bytes) {
  auto f = File::from_bytes(bytes, "x.safetensors");
  return f.is_ok() ? std::string("<no error>") : f.status().message();
}

TEST(Safetensors, ReadsTensorsAndMetadata) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},"c":{"dtype":"I64","shape":[1],"data_offsets":[32,40]}})";
  auto f = File::from_bytes(make_file(header, 40), "x.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 3u);
  const TensorInfo* a = (*f)->tensor("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::f32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->data[0], 0);
  const TensorInfo* b = (*f)->tensor("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::bf16);
  EXPECT_EQ(b->data[0], 24);  // data bytes count up from 0 after the header
  EXPECT_FALSE((*f)->tensor("c")->dtype.has_value());
  EXPECT_EQ((*f)->tensor("c")->dtype_name, "I64");
  EXPECT_EQ((*f)->metadata().at("format"), "pt");
  EXPECT_EQ((*f)->tensor("missing"), nullptr);
}

TEST(Safetensors, OffsetsPastTheDataAreAnError) {
  const std::string msg = error_of(make_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  EXPECT_NE(msg.find("tensor 'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("outside the data section of 8 bytes"), std::string::npos) << msg;
}

TEST(Safetensors, SizeThatDisagreesWithShapeIsAnError) {
  const std::string msg = error_of(make_file(R"({"w":{"dtype":"F16","shape":[4],"data_offsets":[0,6]}})", 16));
  EXPECT_NE(msg.find("needs 8 bytes"), std::string::npos) << msg;
}

TEST(Safetensors, OverlappingTensorsAreAnError) {
  const std::string msg = error_of(make_file(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 16));
  EXPECT_NE(msg.find("overlap"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLongerThanFileIsAnError) {
  std::string bytes = make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  bytes[0] = static_cast<char>(0xff);
  bytes[3] = static_cast<char>(0x7f);
  EXPECT_NE(error_of(bytes).find("header length"), std::string::npos);
  EXPECT_NE(error_of("abc").find("too short"), std::string::npos);
}

TEST(Safetensors, MalformedEntriesAreErrors) {
  EXPECT_NE(error_of(make_file("{not json", 0)).find("not a JSON object"), std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4)).find("non-negative"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"Q9","shape":[1],"data_offsets":[0,4]}})", 4)).find("unknown dtype 'Q9'"),
            std::string::npos);
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[1]}})", 4)).find("data_offsets"), std::string::npos);
  // A shape whose element count overflows 64 bits must not wrap around to a small size.
  EXPECT_NE(error_of(make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,0]}})", 4))
                .find("more elements"),
            std::string::npos);
}

}  // namespace
}  // namespace vrun::safetensors
