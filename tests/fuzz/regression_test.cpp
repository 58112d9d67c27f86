// Inputs the fuzz targets found crashing (or leaking) a reader, kept under regressions/<target>/:
// each must now be refused with a message, or read correctly. These run in every build; the
// sanitizer tree also runs each file through its fuzz target.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/common/tokenizer/loaders.h"
#include "models/ct2/ct2_file.h"
#include "models/gguf/ggml_dequant.h"
#include "models/gguf/gguf_file.h"
#include "models/llama/hf_llama.h"
#include "models/torch_ckpt/archive.h"
#include "models/torch_ckpt/pickle.h"
#include "preprocess/audio_loader.h"
#include "runtime/base/dtype.h"
#include "runtime/executor.h"
#include "runtime/program.h"
#include "tests/fuzz/fuzz_util.h"
#include "tests/fuzz/program_runs.h"

namespace {

const std::string kDir = VRUN_FUZZ_REGRESSIONS;

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A GGUF tensor with a zero dimension and a 8.6e9-element one: converting it sized a one-row
// scratch buffer from the row length (34 GB) although there were no rows. Empty tensors now
// convert to nothing.
TEST(FuzzRegression, GgufZeroDimensionTensorAllocatesNothing) {
  auto f = vrun::gguf::File::open(kDir + "/gguf/zero_dimension_sized_a_row_buffer_from_the_other.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  int empty = 0;
  for (const auto& t : (*f)->tensors()) {
    if (t.ne.empty() || t.numel() != 0 || !vrun::gguf::ggml_import_dtype(t.type)) continue;
    auto c = vrun::gguf::convert_ggml_tensor(t.type, t.data, 0, t.ne[0]);
    if (c.is_ok()) ++empty;
    else EXPECT_NE(c.status().message().find("no conversion"), std::string::npos) << t.name << ": " << c.status().message();
  }
  EXPECT_GT(empty, 0);
  auto bad = vrun::gguf::convert_ggml_tensor(static_cast<uint32_t>(vrun::gguf::GgmlType::Q4_K), nullptr, -1, 256, vrun::DType::f32);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("no valid size"), std::string::npos) << bad.status().message();
}

// A GGUF whose k-quant scales decode to infinity: re-quantising it to q8_0 converted inf * 0 (nan)
// to an integer, which is undefined. The importer's conversions now clamp.
TEST(FuzzRegression, GgufNonFiniteValuesRequantisedToQ8_0) {
  auto f = vrun::gguf::File::open(kDir + "/gguf/nonfinite_requantised_to_q8_0.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  int converted = 0;
  for (const auto& t : (*f)->tensors()) {
    if (!vrun::gguf::ggml_import_dtype(t.type) || t.numel() > (1 << 16)) continue;
    const int64_t cols = t.ne[0];
    // Types vrun runs as they are (f32, f16, q8_0, ...) have nothing to convert and say so.
    auto c = vrun::gguf::convert_ggml_tensor(t.type, t.data, t.numel() / cols, cols);
    if (c.is_ok()) ++converted;
    else EXPECT_NE(c.status().message().find("no conversion"), std::string::npos) << t.name << ": " << c.status().message();
  }
  EXPECT_GT(converted, 0);
  // The rule itself: infinities saturate, nan becomes 0.
  float x[32];
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);
  x[3] = std::numeric_limits<float>::infinity();
  x[5] = -std::numeric_limits<float>::infinity();
  x[7] = std::numeric_limits<float>::quiet_NaN();
  vrun::BlockQ8_0 b;
  vrun::quantize_row(vrun::DType::q8_0, x, &b, 32);
  for (int i = 0; i < 32; ++i) EXPECT_GE(b.qs[i], -127) << i;
  EXPECT_EQ(b.qs[7], 0);
}

// config.json with "model_type" given twice, the second a number: nlohmann's value() threw
// through the importer and ended the process.
TEST(FuzzRegression, HfConfigValueOfWrongType) {
  const std::string input = bytes_of(kDir + "/hf_checkpoint/config_value_of_wrong_type");
  const auto parts = vrun::fuzz::write_parts(reinterpret_cast<const uint8_t*>(input.data()), input.size(),
                                             {"config.json", "model.safetensors"});
  ASSERT_GE(parts.size(), 2u);
  auto& s = vrun::fuzz::scratch();
  auto m = vrun::llama::import_hf_folder(s.dir());
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(s.dir()), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("wrong type"), std::string::npos) << m.status().message();
}

// A pickle that puts a container inside itself (through the memo): the value leaked, and any
// walk over it would not end.
TEST(FuzzRegression, PickleCyclicValue) {
  const std::string input = bytes_of(kDir + "/pickle/cyclic_value.pkl");
  auto p = vrun::torch_ckpt::read_pickle({reinterpret_cast<const uint8_t*>(input.data()), input.size()}, "data.pkl");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("data.pkl"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("contain itself"), std::string::npos) << p.status().message();
}

// A tar whose pax header holds a record whose length field ("1 ") is shorter than the digits and
// the space it counts: the record's text length came out as -1 (a size_t past 2^64), and the
// string built from it overflowed its pointer. Such a record now ends the pax header, and the
// archive is refused at its next header.
TEST(FuzzRegression, PaxRecordShorterThanItsLengthField) {
  const std::string input = bytes_of(kDir + "/nemo/pax_record_shorter_than_its_length_field.nemo");
  auto t = vrun::torch_ckpt::read_tar({reinterpret_cast<const uint8_t*>(input.data()), input.size()}, "model.nemo");
  ASSERT_FALSE(t.is_ok());  // the header after it is corrupt too
  EXPECT_NE(t.status().message().find("model.nemo: not a tar archive, or corrupt (header at byte 1024"), std::string::npos)
      << t.status().message();
}

// A SentencePiece model with a zero-length piece: libsentencepiece's trie builder threw an
// exception through the loader.
TEST(FuzzRegression, SentencePieceZeroLengthPiece) {
  const std::string input = bytes_of(kDir + "/tokenizer_model/spm_zero_length_piece.model");
  auto t = vrun::tok::load_sentencepiece(input, "tokenizer.model");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tokenizer.model"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("SentencePiece"), std::string::npos) << t.status().message();
}

// An AU file of 4 frames at 540288 Hz: resampled to 16 kHz it gave no samples at all, and the
// loader returned that empty signal as audio.
TEST(FuzzRegression, AudioShorterThanOneOutputSample) {
  auto a = vrun::preprocess::load_audio(kDir + "/audio/au_shorter_than_one_output_sample.au");
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("too short"), std::string::npos) << a.status().message();
  EXPECT_NE(a.status().message().find("540288 Hz"), std::string::npos) << a.status().message();
}

// A kept program that loads, run as the fuzz target runs it: the refusals of its methods.
std::string program_refusals(const std::string& name) {
  const std::string input = bytes_of(kDir + "/program_loader/" + name);
  auto p = vrun::load_program_from_memory(reinterpret_cast<const uint8_t*>(input.data()), input.size(), name);
  if (!p.is_ok()) return "did not load: " + p.status().message();
  auto ex = vrun::Executor::create(*p, {vrun::BackendKind::kCpu, 1});
  if (!ex.is_ok()) return "no executor: " + ex.status().message();
  return vrun::fuzz::run_token_methods(**ex, **p);
}

// A program whose reshape asks for a shape of more than 2^63 elements: the element count
// overflowed (undefined) while the view was computed at run time.
TEST(FuzzRegression, ProgramReshapeElementCountOverflow) {
  const std::string refusal = program_refusals("reshape_element_count_overflow.vrp");
  EXPECT_EQ(refusal.find("did not load"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("reshape"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("overflows"), std::string::npos) << refusal;
}

// A program whose symbol bounds plan a 20 GiB scratch arena: under the fuzzer's memory limit the
// allocation stopped the run. With VRUN_MAX_ARENA_MB (as the fuzz target sets it) the call is
// refused as out of memory, naming the arena.
TEST(FuzzRegression, ProgramArenaOverTheCeiling) {
  const char* before = std::getenv("VRUN_MAX_ARENA_MB");
  const std::string saved = before ? before : "";
  setenv("VRUN_MAX_ARENA_MB", "256", 1);
  const std::string refusal = program_refusals("arena_of_20_gib.vrp");
  if (before) setenv("VRUN_MAX_ARENA_MB", saved.c_str(), 1);
  else unsetenv("VRUN_MAX_ARENA_MB");
  EXPECT_NE(refusal.find("scratch arena of"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("VRUN_MAX_ARENA_MB"), std::string::npos) << refusal;
}

// A CTranslate2 scalar of 3.8e22 read as an integer (a head count): the float-to-integer
// conversion was undefined.
TEST(FuzzRegression, Ct2FloatScalarReadAsInteger) {
  auto f = vrun::ct2::File::from_bytes(bytes_of(kDir + "/ct2/float_scalar_read_as_integer.bin"), "model.bin");
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  std::string refusals;
  for (const auto& v : (*f)->variables())
    if (v.shape.empty())
      if (auto i = (*f)->scalar_int(v.name); !i.is_ok()) refusals += i.status().message() + "\n";
  EXPECT_NE(refusals.find("model.bin"), std::string::npos) << refusals;
  EXPECT_NE(refusals.find("not an integer"), std::string::npos) << refusals;
}

// tokenizer.json with a token id written as a float of 9.7e91: nlohmann's unchecked conversion to
// an integer was undefined.
TEST(FuzzRegression, TokenizerJsonFloatTokenId) {
  auto t = vrun::tok::load_hf_tokenizer_json(bytes_of(kDir + "/tokenizer_json/float_token_id.json"), "tokenizer.json");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("tokenizer.json"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("token id"), std::string::npos) << t.status().message();
}

// The same reader's added tokens were indexed by their id unchecked: a negative one wrote before
// the vocabulary's arrays (seen while fixing the case above).
TEST(FuzzRegression, TokenizerJsonNegativeAddedTokenId) {
  auto j = nlohmann::json::parse(bytes_of(std::string(VRUN_FUZZ_CORPUS) + "/tokenizer_json/bytelevel_bpe.json"));
  ASSERT_TRUE(vrun::tok::load_hf_tokenizer_json(j.dump(), "tokenizer.json").is_ok());
  j["added_tokens"][0]["id"] = -5;
  auto t = vrun::tok::load_hf_tokenizer_json(j.dump(), "tokenizer.json");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("token id -5 is out of range"), std::string::npos) << t.status().message();
}

// A tiktoken rank file whose one line names rank 99999999: the vocabulary was sized from it,
// gigabytes for a few hundred bytes (libFuzzer's malloc limit stopped it).
TEST(FuzzRegression, TiktokenRankFarPastTheLines) {
  auto t = vrun::tok::load_tokenizer_file(kDir + "/tokenizer_model/tiktoken_rank_far_past_the_lines.model");
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("lines (ranks are distinct, one a line)"), std::string::npos) << t.status().message();
  auto one = vrun::tok::load_tiktoken_ranks("QQ== 99999999\n", "tokenizer.model");
  ASSERT_FALSE(one.is_ok());
  EXPECT_NE(one.status().message().find("rank 99999999"), std::string::npos) << one.status().message();
}

// A program whose [long] vector (a symbolic expression's coefficients) starts four bytes off: the
// verifier checks a vector's length field, not its elements, and Get() made a misaligned 8-byte
// load (UBSan in the sanitizer tree). The loader reads such elements byte-wise; this file then
// loads, or is refused by the later checks with a message naming it.
TEST(FuzzRegression, ProgramMisalignedInt64Vector) {
  const std::string input = bytes_of(kDir + "/program_loader/misaligned_int64_vector.vrp");
  auto p = vrun::load_program_from_memory(reinterpret_cast<const uint8_t*>(input.data()), input.size(), "misaligned.vrp");
  if (p.is_ok()) {
    EXPECT_FALSE((*p)->methods.empty());
  } else {
    EXPECT_NE(p.status().message().find("misaligned.vrp"), std::string::npos) << p.status().message();
  }
}

}  // namespace
