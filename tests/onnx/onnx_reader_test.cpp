// The ONNX reader on untrusted bytes, and the importer's messages for what it cannot map.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "models/onnx/onnx_import.h"

namespace vrun {
namespace {

const std::string kDir = std::string(VRUN_TEST_DATA) + "/onnx/";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(OnnxReader, ReadsTheGraph) {
  auto m = onnx::read_model(kDir + "seed.onnx");
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->opset(), 17);
  ASSERT_EQ(m->graph.inputs.size(), 1u);
  EXPECT_EQ(m->graph.inputs[0].dims[0].param, "batch");
  EXPECT_EQ(m->graph.inputs[0].dims[1].value, 16);
}

TEST(OnnxReader, EveryTruncationIsAnErrorNotACrash) {
  const std::string bytes = read_all(kDir + "yolo_tiny.onnx");
  ASSERT_GT(bytes.size(), 1000u);
  int failures = 0;
  for (size_t cut = 0; cut < bytes.size(); cut += bytes.size() / 97 + 1) {
    auto m = onnx::parse_model(reinterpret_cast<const uint8_t*>(bytes.data()), cut, "cut");
    if (!m.is_ok()) {
      ++failures;
      continue;
    }
    // What parses may still be incomplete: importing it must fail cleanly or succeed.
    auto p = onnx::import_onnx_model(*m, "cut");
    (void)p;
  }
  EXPECT_GT(failures, 0);
}

TEST(OnnxReader, FlippedBytesAreHandled) {
  std::string bytes = read_all(kDir + "seed.onnx");
  ASSERT_FALSE(bytes.empty());
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0xA5);
    auto m = onnx::parse_model(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "flipped");
    if (m.is_ok()) (void)onnx::import_onnx_model(*m, "flipped");
  }
}

TEST(OnnxImport, AnUnmappedOpIsNamedWithItsNodeAndOpset) {
  auto p = onnx::import_onnx(kDir + "unsupported_op.onnx");
  ASSERT_FALSE(p.is_ok());
  const std::string msg = p.status().to_string();
  EXPECT_NE(msg.find("'det0'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Det"), std::string::npos) << msg;
  EXPECT_NE(msg.find("opset 17"), std::string::npos) << msg;
}

TEST(OnnxImport, ExternalDataIsRefusedWithAReason) {
  auto p = onnx::import_onnx(kDir + "external_data.onnx");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().to_string().find("external"), std::string::npos) << p.status().to_string();
}

TEST(OnnxImport, DimOptions) {
  onnx::ImportOptions o;
  EXPECT_TRUE(onnx::parse_dim_option("batch=4", &o).is_ok());
  EXPECT_EQ(o.dims["batch"], std::make_pair(int64_t{4}, int64_t{4}));
  EXPECT_TRUE(onnx::parse_dim_option("n=2:8", &o).is_ok());
  EXPECT_FALSE(onnx::parse_dim_option("n=8:2", &o).is_ok());
  EXPECT_FALSE(onnx::parse_dim_option("=3", &o).is_ok());
  EXPECT_FALSE(onnx::parse_dim_option("n=x", &o).is_ok());
}

}  // namespace
}  // namespace vrun
