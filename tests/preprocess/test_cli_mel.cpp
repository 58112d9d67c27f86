// `vrun mel` end to end: the .npy it writes holds the reference features, standard input works,
// and every bad input ends with a message on stderr and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>

#include "preprocess/features.h"
#include "tests/preprocess/audio_test_util.h"

namespace vrun::preprocess {
namespace {

const std::string kVrun = std::string(VRUN_BINARY_DIR) + "/bin/vrun";
const std::string kDir = std::string(VRUN_TEST_DATA) + "/audio/";

struct CliRun {
  int exit_code;
  std::string stderr_text;
};

CliRun vrun(const std::string& args) {
  const std::string err_path = testing::temp_path("stderr.txt");
  const int status = std::system((kVrun + " " + args + " 2> " + err_path).c_str());
  const auto bytes = testing::read_bytes(err_path);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, std::string(bytes.begin(), bytes.end())};
}

float max_diff(const NpyArray& ours, const NpyArray& ref) {
  float worst = 0;
  const int64_t frames = ours.shape[1], ref_frames = ref.shape[1];
  for (int64_t m = 0; m < ours.shape[0]; ++m)
    for (int64_t t = 0; t < std::min(frames, ref_frames); ++t)
      worst = std::max(worst, std::abs(ours.data[static_cast<size_t>(m * frames + t)] - ref.data[static_cast<size_t>(m * ref_frames + t)]));
  return worst;
}

TEST(VrunMel, WhisperFeaturesMatchTheReference) {
  const std::string out = testing::temp_path("w.npy");
  const CliRun r = vrun("mel " + kDir + "speech_0880.wav --kind whisper --n-mels 128 -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto ours = read_npy(out);
  auto ref = read_npy(kDir + "speech_0880_whisper128.npy");
  ASSERT_TRUE(ours.is_ok() && ref.is_ok());
  ASSERT_EQ(ours->shape, (std::vector<int64_t>{128, 2990 / 10 + 3000}));
  EXPECT_LE(max_diff(*ours, *ref), 1e-4f);
}

TEST(VrunMel, NemoFeaturesFromStdinAndConfig) {
  const std::string out = testing::temp_path("n.npy");
  const CliRun r = vrun("mel - --kind nemo --config " + kDir + "nemo_parakeet128.json -o " + out + " < " + kDir +
                     "speech_0930.wav");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  auto ours = read_npy(out);
  auto ref = read_npy(kDir + "speech_0930_nemo_parakeet128.npy");
  ASSERT_TRUE(ours.is_ok() && ref.is_ok());
  ASSERT_EQ(ours->shape, ref->shape);
  EXPECT_LE(max_diff(*ours, *ref), 1e-4f);
}

TEST(VrunMel, BadInputsExitNonZeroWithAMessage) {
  const std::string empty = testing::temp_path("empty.wav");
  testing::write_bytes(empty, {});
  const std::string text = testing::temp_path("text.mp3");
  const std::string words = "not audio at all";
  testing::write_bytes(text, std::vector<uint8_t>(words.begin(), words.end()));
  const std::string flac = testing::temp_path("whole.flac");
  ASSERT_EQ(testing::write_test_signal(flac, testing::all_encodings()[4], 48000, 1, 1.0), "");
  auto bytes = testing::read_bytes(flac);
  bytes.resize(bytes.size() / 3);
  const std::string cut = testing::temp_path("cut.flac");
  testing::write_bytes(cut, bytes);
  const std::string out = testing::temp_path("never.npy");
  for (const auto& [path, what] : std::vector<std::pair<std::string, std::string>>{
           {empty, "empty"}, {text, "not a readable audio file"}, {cut, "truncated"}, {testing::temp_path("nope.wav"), "no such file"}}) {
    const CliRun r = vrun("mel " + path + " --kind whisper -o " + out);
    EXPECT_NE(r.exit_code, 0) << path;
    EXPECT_NE(r.stderr_text.find(path), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(what), std::string::npos) << r.stderr_text;
  }
  const CliRun bad_mels = vrun("mel " + flac + " --kind whisper --n-mels 64 -o " + out);
  EXPECT_NE(bad_mels.exit_code, 0);
  EXPECT_NE(bad_mels.stderr_text.find("80 or 128"), std::string::npos) << bad_mels.stderr_text;
  const CliRun bad_kind = vrun("mel " + flac + " --kind mfcc -o " + out);
  EXPECT_NE(bad_kind.exit_code, 0);
}

}  // namespace
}  // namespace vrun::preprocess
