// Corrupt programs are refused with a clear message, never a crash: truncations, bit flips,
// header lies and lying tables (hundreds of variants). Where a damaged file still verifies (a
// flipped bit inside constant data, say), running it must not crash either. Run under ASan to
// make "no crash" mean "no invalid memory access".
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "runtime/executor.h"
#include "runtime/program_file.h"
#include "tests/runtime/tiny_transformer.h"

namespace vrun::test {
namespace {

std::shared_ptr<Program> tiny() {
  TinyConfig cfg;
  cfg.layers = 1;
  cfg.ctx = 8;
  cfg.max_seq = 4;
  auto p = build_tiny_transformer(make_tiny_weights(cfg, 99));
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return *p;
}

// Loads; when the program verifies, runs it once. Returns whether loading failed.
bool load_and_maybe_run(const std::vector<uint8_t>& bytes, std::string* message) {
  auto p = load_program_from_memory(bytes.data(), bytes.size(), "variant");
  if (!p.is_ok()) {
    *message = p.status().message();
    return true;
  }
  auto ex = Executor::create(*p, {BackendKind::kCpu, 1});
  if (!ex.is_ok()) return false;
  int32_t toks[2] = {1, 2};
  for (const auto& m : (*p)->methods) {
    if (m.inputs.size() != 1 || m.values[m.inputs[0]].dtype != DType::i32) continue;
    auto r = (*ex)->run(m.name, {TensorView::dense(toks, DType::i32, {1, 2})}, {{"pos", 0}});
    (void)r;  // an error is fine; a crash is not
  }
  return false;
}

TEST(CorruptProgram, TruncationsAreRefused) {
  auto bytes = serialize_program(*tiny());
  ASSERT_TRUE(bytes.is_ok());
  const size_t n = bytes->size();
  std::vector<size_t> cuts = {0, 1, 7, 8, 63, 64, 65, 100};
  for (int k = 1; k < 200; ++k) cuts.push_back(n * k / 200);
  cuts.push_back(n - 1);
  for (size_t cut : cuts) {
    std::vector<uint8_t> t(bytes->begin(), bytes->begin() + static_cast<std::ptrdiff_t>(cut));
    std::string msg;
    EXPECT_TRUE(load_and_maybe_run(t, &msg)) << "truncated to " << cut << " of " << n << " bytes was accepted";
    EXPECT_FALSE(msg.empty());
  }
}

TEST(CorruptProgram, BitFlipsNeverCrash) {
  auto bytes = serialize_program(*tiny());
  ASSERT_TRUE(bytes.is_ok());
  const size_t table_end = sizeof(ProgramFileHeader) + reinterpret_cast<const ProgramFileHeader*>(bytes->data())->flatbuffer_size;
  std::mt19937 rng(5);
  int refused = 0;
  for (int k = 0; k < 400; ++k) {
    std::vector<uint8_t> t = *bytes;
    // Mostly inside the header and table, where the structure lives.
    const size_t at = k % 4 == 0 ? rng() % t.size() : rng() % table_end;
    t[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
    std::string msg;
    refused += load_and_maybe_run(t, &msg);
  }
  EXPECT_GT(refused, 50) << "bit flips in the table should mostly be caught";
}

TEST(CorruptProgram, HeaderLiesAreRefused) {
  auto bytes = serialize_program(*tiny());
  ASSERT_TRUE(bytes.is_ok());
  auto with = [&](auto mutate) {
    std::vector<uint8_t> t = *bytes;
    ProgramFileHeader h;
    std::memcpy(&h, t.data(), sizeof(h));
    mutate(h);
    std::memcpy(t.data(), &h, sizeof(h));
    std::string msg;
    const bool refused = load_and_maybe_run(t, &msg);
    return refused ? msg : std::string();
  };
  EXPECT_NE(with([](ProgramFileHeader& h) { h.magic[0] = 'X'; }).find("magic"), std::string::npos);
  EXPECT_NE(with([](ProgramFileHeader& h) { h.version = 99; }).find("version 99"), std::string::npos);
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.flatbuffer_size = ~0ull; }).empty());
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.flatbuffer_offset = 1ull << 62; }).empty());
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.segment_size += 4096; }).empty());
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.segment_offset += 1; }).empty());
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.segment_offset = ~0ull - 4095; }).empty());
  EXPECT_FALSE(with([](ProgramFileHeader& h) { h.flatbuffer_size -= 16; }).empty());
}

// Valid containers whose tables lie: each mutation is serialised without verification and must
// be refused by the loader with a message.
TEST(CorruptProgram, LyingTablesAreRefused) {
  const auto base = tiny();
  std::vector<std::pair<std::string, std::function<void(Program&)>>> lies = {
      {"constant size", [](Program& p) { p.constants[0].size -= 4; }},
      {"constant shape", [](Program& p) { p.constants[1].shape[0] = 1ll << 50; }},
      {"negative dim", [](Program& p) { p.states[0].shape[1] = -3; }},
      {"quantised row", [](Program& p) { p.states[0].dtype = DType::q8_0; }},
      {"arena too small", [](Program& p) { p.methods[0].arena_size = 8; }},
      {"value arena offset", [](Program& p) {
         for (auto& v : p.methods[0].values)
           if (v.arena_offset >= 0) v.arena_offset = p.methods[0].arena_size;
       }},
      {"node input id", [](Program& p) { p.methods[0].nodes[3].inputs[0] = 100000; }},
      {"node output id", [](Program& p) { p.methods[0].nodes[3].outputs[0] = -7; }},
      {"input order", [](Program& p) { p.methods[0].inputs.clear(); }},
      {"output id", [](Program& p) { p.methods[0].outputs[0] = 1 << 20; }},
      {"constant index", [](Program& p) {
         for (auto& v : p.methods[0].values)
           if (v.kind == ValueKind::kConstant) v.index = 1000;
       }},
      {"state index", [](Program& p) {
         for (auto& v : p.methods[0].values)
           if (v.kind == ValueKind::kState) v.index = -2;
       }},
      {"symbol bounds", [](Program& p) { p.methods[0].symbols[0].max = -1; }},
      {"expr symbol", [](Program& p) {
         for (auto& n : p.methods[0].nodes)
           for (auto& [k, e] : n.attrs.int_exprs) e.terms = {{9, 1}};
       }},
      {"missing attribute", [](Program& p) {
         for (auto& n : p.methods[0].nodes)
           if (n.op == OpKind::slice) n.attrs.values.at(0).set = false;
       }},
      {"too few inputs", [](Program& p) {
         for (auto& n : p.methods[0].nodes)
           if (n.op == OpKind::linear) n.inputs.resize(1);
       }},
      {"use before def", [](Program& p) { std::swap(p.methods[0].nodes[2], p.methods[0].nodes[5]); }},
      {"duplicate method", [](Program& p) { p.methods.push_back(p.methods[0]); }},
      {"view base", [](Program& p) {
         for (auto& v : p.methods[0].values)
           if (v.view_base >= 0) v.view_base = 1 << 20;
       }},
  };
  for (const auto& [what, lie] : lies) {
    Program p = *base;
    lie(p);
    auto bytes = serialize_program(p, /*verify=*/false);
    ASSERT_TRUE(bytes.is_ok()) << what;
    auto loaded = load_program_from_memory(bytes->data(), bytes->size(), "lie");
    EXPECT_FALSE(loaded.is_ok()) << what << " was accepted";
    if (!loaded.is_ok()) {
      EXPECT_EQ(loaded.status().code(), ErrorCode::kInvalidProgram) << what << ": " << loaded.status().to_string();
    }
  }
}

TEST(CorruptProgram, UnknownOpIsNamed) {
  auto bytes = serialize_program(*tiny());
  ASSERT_TRUE(bytes.is_ok());
  // Rename one op in place ("rms_norm" -> "rms_nurm"): same length, so the table stays valid.
  std::string s(bytes->begin(), bytes->end());
  const size_t at = s.find("rms_norm");
  ASSERT_NE(at, std::string::npos);
  (*bytes)[at + 5] = 'u';
  auto loaded = load_program_from_memory(bytes->data(), bytes->size(), "renamed");
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("unknown op 'rms_nurm'"), std::string::npos) << loaded.status().message();
}

TEST(CorruptProgram, MissingAndNonProgramFiles) {
  auto r = load_program("/nonexistent/model.vrp");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  const std::string text = "this is plainly not a program, just some text that is long enough to have a header....";
  auto t = load_program_from_memory(reinterpret_cast<const uint8_t*>(text.data()), text.size(), "text");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("not a vrun program"), std::string::npos);
}

}  // namespace
}  // namespace vrun::test
