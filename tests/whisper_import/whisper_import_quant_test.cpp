// Quantised weights: whisper.cpp ggml files with q4_0 / q5_0 / q5_1 / q8_0 tensors and CTranslate2
// int8 weights, written here byte by byte (large-v3 layout: 128 mels, 51866 ids), must come out
// as the values the file encodes. The reference decoders below are written from the formats'
// definitions in float64, independent of the importers and of runtime/dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "models/whisper/whisper_import.h"

namespace vrun::whisper {
namespace {

namespace fs = std::filesystem;

struct Bytes {
  std::string b;
  template <class T>
  void put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) { b += s; }
};

double half(uint16_t h) {  // IEEE binary16
  const int e = (h >> 10) & 31, m = h & 1023;
  const double s = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0) return s * std::ldexp(m, -24);
  return s * std::ldexp(1024 + m, e - 25);
}

// Reference dequantisers: one 32-value block each, per ggml's block definitions.
std::vector<double> ref_block(int type, const uint8_t* p) {
  std::vector<double> out(32);
  uint16_t dh, mh;
  std::memcpy(&dh, p, 2);
  std::memcpy(&mh, p + 2, 2);
  const double d = half(dh), m = half(mh);
  if (type == 8) {  // q8_0: d, int8[32]
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<int8_t>(p[2 + j]);
  } else if (type == 2) {  // q4_0: d, nibbles (low: 0..15, high: 16..31), value (q - 8) d
    for (int j = 0; j < 16; ++j) out[j] = d * ((p[2 + j] & 15) - 8), out[j + 16] = d * ((p[2 + j] >> 4) - 8);
  } else {  // q5_0 (6): d, qh, nibbles, (q - 16) d; q5_1 (7): d, m, qh, nibbles, q d + m
    const uint8_t* q = p + (type == 7 ? 4 : 2);
    const uint32_t qh = q[0] | (q[1] << 8) | (q[2] << 16) | (static_cast<uint32_t>(q[3]) << 24);
    for (int j = 0; j < 16; ++j) {
      const int lo = (q[4 + j] & 15) | (((qh >> j) & 1) << 4), hi = (q[4 + j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      out[j] = type == 7 ? lo * d + m : (lo - 16) * d;
      out[j + 16] = type == 7 ? hi * d + m : (hi - 16) * d;
    }
  }
  return out;
}

std::vector<double> ref_q8_0(const void* data, int64_t n) {
  std::vector<double> out;
  for (int64_t b = 0; b < n / 32; ++b) {
    auto v = ref_block(8, static_cast<const uint8_t*>(data) + b * 34);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

TEST(WhisperImportQuant, GgmlQuantisedTensors) {
  const int64_t d = 64, vocab = 51866;
  std::mt19937 rng(11);
  Bytes f;
  f.put<uint32_t>(0x67676d6c);
  for (int32_t v : {int32_t(vocab), 1500, int32_t(d), 2, 1, 448, int32_t(d), 2, 1, 128, 1008}) f.put(v);  // ftype: q5_0, version 1
  f.put<int32_t>(128);
  f.put<int32_t>(2);
  for (int i = 0; i < 256; ++i) f.put<float>(0.0f);
  f.put<int32_t>(50257);  // the 256 bytes, then unique made-up multi-byte tokens
  for (int i = 0; i < 50257; ++i) {
    const std::string w = i < 256 ? std::string(1, static_cast<char>(i)) : "w" + std::to_string(i);
    f.put<int32_t>(static_cast<int32_t>(w.size()));
    f.str(w);
  }
  // (name, ggml type, block bytes): q/k/v share a type so they fuse.
  const struct {
    const char* name;
    int type, block;
  } tensors[] = {{"encoder.blocks.0.attn.query.weight", 6, 22}, {"encoder.blocks.0.attn.key.weight", 6, 22},
                 {"encoder.blocks.0.attn.value.weight", 6, 22}, {"encoder.blocks.0.mlp.0.weight", 7, 24},
                 {"encoder.blocks.0.mlp.2.weight", 2, 18},       {"decoder.blocks.0.attn.out.weight", 8, 34}};
  std::map<std::string, std::string> raw;
  for (const auto& t : tensors) {
    const bool fc2 = std::string(t.name).find("mlp.2") != std::string::npos;
    const int64_t rows = std::string(t.name).find("mlp.0") != std::string::npos ? 4 * d : d, cols = fc2 ? 4 * d : d;
    std::string data;
    for (int64_t b = 0; b < rows * cols / 32; ++b) {
      const uint16_t dh = static_cast<uint16_t>(0x2000 + (rng() % 0x0800));  // scales around 2^-7
      std::string blk(static_cast<size_t>(t.block), '\0');
      for (auto& c : blk) c = static_cast<char>(rng());
      std::memcpy(blk.data(), &dh, 2);
      if (t.type == 7) std::memcpy(blk.data() + 2, &dh, 2);
      data += blk;
    }
    raw[t.name] = data;
    f.put<int32_t>(2);
    f.put<int32_t>(static_cast<int32_t>(std::strlen(t.name)));
    f.put<int32_t>(t.type);
    f.put<int32_t>(static_cast<int32_t>(cols));
    f.put<int32_t>(static_cast<int32_t>(rows));
    f.str(t.name);
    f.str(data);
  }
  const fs::path path = fs::temp_directory_path() / "vrun_wimport_quant.bin";
  std::ofstream(path, std::ios::binary).write(f.b.data(), static_cast<std::streamsize>(f.b.size()));
  auto m = import_whisper(path.string());
  fs::remove(path);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  EXPECT_EQ(m->config.n_mels, 128);
  EXPECT_EQ(m->config.n_vocab, vocab);
  bool noted = false;
  for (const auto& n : m->notes) noted |= n.find("q5_0 tensors converted to q8_0") != std::string::npos;
  EXPECT_TRUE(noted);

  auto check = [&](const std::string& canonical, std::vector<std::pair<std::string, int>> parts, DType want) {
    SCOPED_TRACE(canonical);
    auto w = m->weights(canonical);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->dtype, want);
    std::vector<double> ref;
    for (const auto& [name, type] : parts) {
      const int block = type == 6 ? 22 : type == 7 ? 24 : type == 2 ? 18 : 34;
      const std::string& data = raw.at(name);
      for (size_t b = 0; b * static_cast<size_t>(block) < data.size(); ++b) {
        auto v = ref_block(type, reinterpret_cast<const uint8_t*>(data.data()) + b * static_cast<size_t>(block));
        ref.insert(ref.end(), v.begin(), v.end());
      }
    }
    int64_t n = 1;
    for (int64_t s : w->shape) n *= s;
    ASSERT_EQ(n, static_cast<int64_t>(ref.size()));
    std::vector<double> got;
    if (w->dtype == DType::q8_0) {
      got = ref_q8_0(w->data, n);
    } else {
      for (int64_t b = 0; b < n / 32; ++b) {
        auto v = ref_block(w->dtype == DType::q4_0 ? 2 : 8, static_cast<const uint8_t*>(w->data) + b * 18);
        got.insert(got.end(), v.begin(), v.end());
      }
    }
    for (int64_t b = 0; b < n / 32; ++b) {
      double amax = 0;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(ref[static_cast<size_t>(b * 32 + j)]));
      // Re-quantising to q8_0 rounds each value to a step of amax / 127 (and the scale to f16).
      const double tol = want == DType::q8_0 && parts[0].second != 8 ? amax / 127 * 0.5 + amax * 1e-3 : 0.0;
      for (int j = 0; j < 32; ++j) {
        const size_t i = static_cast<size_t>(b * 32 + j);
        ASSERT_LE(std::fabs(got[i] - ref[i]), tol) << "value " << i;
      }
    }
  };
  check("encoder/layer_0/self_attention/linear_0/weight",
        {{"encoder.blocks.0.attn.query.weight", 6}, {"encoder.blocks.0.attn.key.weight", 6}, {"encoder.blocks.0.attn.value.weight", 6}},
        DType::q8_0);
  check("encoder/layer_0/ffn/linear_0/weight", {{"encoder.blocks.0.mlp.0.weight", 7}}, DType::q8_0);
  check("encoder/layer_0/ffn/linear_1/weight", {{"encoder.blocks.0.mlp.2.weight", 2}}, DType::q4_0);
  check("decoder/layer_0/self_attention/linear_1/weight", {{"decoder.blocks.0.attn.out.weight", 8}}, DType::q8_0);
  // large-v3's special tokens, from the file's vocabulary size.
  EXPECT_NE(m->extras.tokenizer_json.find("\"<|yue|>\""), std::string::npos);
  auto s = special_layout(vocab);
  ASSERT_TRUE(s.is_ok());
  EXPECT_EQ(s->notimestamps, 50364);
  EXPECT_EQ(m->extras.suppress_begin.back(), 50257);
}

TEST(WhisperImportQuant, Ct2Int8WeightsBecomeQ8_0) {
  const uint32_t d = 64, vocab = 51865;
  std::mt19937 rng(5);
  Bytes f;
  f.put<uint32_t>(6);
  auto str = [&](const std::string& s) {
    f.put<uint16_t>(static_cast<uint16_t>(s.size() + 1));
    f.str(s);
    f.b += '\0';
  };
  str("WhisperSpec");
  f.put<uint32_t>(3);
  std::vector<float> scales(4 * d);
  for (float& s : scales) s = 20.0f + static_cast<float>(rng() % 1000) / 10.0f;
  std::string q(4 * d * d, '\0');
  for (auto& c : q) c = static_cast<char>(rng());
  struct Var {
    std::string name;
    std::vector<uint32_t> shape;
    uint8_t dtype;
    std::string data;
  };
  auto f32s = [](size_t n, float v) {
    std::vector<float> x(n, v);
    return std::string(reinterpret_cast<const char*>(x.data()), n * 4);
  };
  auto f16s = [](size_t n) { return std::string(n * 2, '\0'); };
  const std::vector<Var> vars = {
      {"encoder/conv1/weight", {d, 80, 3}, 4, f16s(d * 80 * 3)},
      {"encoder/position_encodings/encodings", {1500, d}, 4, f16s(1500 * d)},
      {"decoder/position_encodings/encodings", {448, d}, 4, f16s(448 * d)},
      {"decoder/embeddings/weight", {vocab, d}, 4, f16s(size_t(vocab) * d)},
      {"encoder/num_heads", {}, 2, std::string("\x02\x00", 2)},
      {"decoder/num_heads", {}, 2, std::string("\x02\x00", 2)},
      {"encoder/layer_0/ffn/linear_0/weight", {4 * d, d}, 1, q},
      {"encoder/layer_0/ffn/linear_0/weight_scale", {4 * d}, 0, std::string(reinterpret_cast<const char*>(scales.data()), scales.size() * 4)},
      {"decoder/layer_0/ffn/linear_0/weight", {4 * d, d}, 0, f32s(4 * d * d, 0.5f)},
  };
  f.put<uint32_t>(static_cast<uint32_t>(vars.size()));
  for (const Var& v : vars) {
    str(v.name);
    f.put<uint8_t>(static_cast<uint8_t>(v.shape.size()));
    for (uint32_t s : v.shape) f.put(s);
    f.put(v.dtype);
    f.put<uint32_t>(static_cast<uint32_t>(v.data.size()));
    f.str(v.data);
  }
  f.put<uint32_t>(0);
  const fs::path dir = fs::temp_directory_path() / "vrun_wimport_ct2_int8";
  fs::create_directories(dir);
  std::ofstream(dir / "model.bin", std::ios::binary).write(f.b.data(), static_cast<std::streamsize>(f.b.size()));
  // A vocabulary.json in byte-level form, as CTranslate2's converter writes it.
  {
    std::ofstream v(dir / "vocabulary.json");
    v << "[";
    for (int i = 0; i < 50257; ++i) v << (i ? "," : "") << "\"w" << i << "\"";
    v << "]";
  }
  auto m = import_whisper(dir.string());
  fs::remove_all(dir);
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto w = m->weights("encoder/layer_0/ffn/linear_0/weight");
  ASSERT_TRUE(w.has_value());
  ASSERT_EQ(w->dtype, DType::q8_0);
  const std::vector<double> got = ref_q8_0(w->data, 4 * d * d);
  for (uint32_t r = 0; r < 4 * d; ++r)
    for (uint32_t c = 0; c < d; ++c) {
      const double want = static_cast<int8_t>(q[r * d + c]) / static_cast<double>(scales[r]);
      ASSERT_NEAR(got[r * d + c], want, std::fabs(want) * 1e-3 + 1e-9) << r << "," << c;  // the f16 block scale
    }
  EXPECT_EQ(m->weights("decoder/layer_0/ffn/linear_0/weight")->dtype, DType::f32);
  bool noted = false;
  for (const auto& n : m->notes) noted |= n.find("1 int8 weights kept as q8_0") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace vrun::whisper
