// The Parakeet graph: one program whose methods share the prediction-network state.
//   encode(features [1, n_mels, frames], symbol enc_len) -> encoder_out [1, enc_len, d_model] and
//     TDT: enc_proj [1, enc_len, joint_hidden] (the joint's encoder projection of every frame),
//          also written to rows [0, enc_len) of state enc_proj [max_batch * max_encoder_frames,
//          joint_hidden];
//     CTC: logits [1, enc_len, vocab + 1].
//     features holds the valid frames only (NeMo masks the rest before every subsampling
//     convolution); enc_len is NeMo's encoded length of them.
//   encode_batch(features [B, n_mels, frames], frame_mask [B, 1, frames, 1] (1 on each job's
//     valid frames, 0 on the padding), symbol enc_len = the longest job's) -> the same for B jobs
//     (B <= max_batch), zero-padded to the longest; TDT writes job j's frame t to state row
//     j * enc_len + t. On the valid frames it computes what encode does on each job alone.
//     encode_batch_<n> (batch_shapes): the same for more jobs of at most n encoder frames; all
//     of them share one scratch arena (kSharedArenasMeta).
//   TDT only:
//   greedy(control [5] i32) -> emitted [kGreedyCapacity + 1, 4] i32: NeMo's greedy TDT / RNN-T
//     loop (op tdt_greedy) over frames [t, end) of state enc_proj, frame t at row t + offset,
//     control = (t, symbols already emitted at t, end, offset, fresh); the prediction network's
//     LSTM state and projection live in state decoder_state (fresh = 1: NeMo's start state, a new
//     stream). emitted row 0 = (count, next t, its symbols, status), rows 1..count = (token,
//     frame, duration); a call that fills its rows stops early, the next goes on from row 0.
//   greedy_batch(control [lanes, 5] i32, state [lanes, 2 L P + J] f32) -> emitted [lanes,
//     kGreedyBatchCapacity + 1, 4], state_out [lanes, 2 L P + J]: the same loop for up to
//     kMaxBatchJobs streams at once, each lane with its own control and prediction-network state
//     (passed in and returned, not kept in the program). Built with the batched encode methods.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/parakeet/parakeet_import.h"
#include "runtime/program.h"

namespace vrun::parakeet {

inline constexpr int64_t kGreedyCapacity = 4096;
inline constexpr int64_t kGreedyBatchCapacity = 1024;  // tokens a lane of greedy_batch emits a call

struct BuildSettings {
  // Encoder frames one encode call takes (80 ms each): the bound of full attention; longer audio
  // is encoded in overlapping chunks by the runner.
  int64_t max_encoder_frames = 2000;
  // Jobs (streams or chunks of one stream) of up to max_encoder_frames one encode_batch call
  // takes; 1 builds no batched method. Shorter jobs go through batched methods for shorter
  // lengths that take more of them in the same frames (batch_shapes: with 4 x 2000, 8 x 1000,
  // 16 x 500, 32 x 250 and 64 x 125 jobs x frames), all in one scratch arena, about this many
  // times encode's (allocated on first use). A call's largest tensor (the first subsampling
  // convolution's output, 32 KiB a feature frame: 0.5 GiB for a job of 2000 encoder frames)
  // must fit one storage binding on a GPU (4 GiB on NVIDIA's Vulkan driver: at most 8 x 2000).
  int64_t max_batch = 4;
  // Attention as one sdpa with the relative-position term as its mask (true), or as bmm,
  // softmax, bmm over materialised scores (false): the same math, for comparing the kernels.
  bool fused_attention = true;
  // Each layer's relative positions already projected by its W_pos when the program is built
  // (true: no call computes them; the program holds 2 max_encoder_frames - 1 rows of d_model per
  // layer), or W_pos kept and applied to the positions in every call (false: a smaller program).
  bool projected_positions = true;
  // Long audio with NeMo's limited-context attention (rel_pos_local_attn): an encode_local method
  // whose attention sees local_window frames on either side (NeMo's advice for long audio is
  // [128, 128]), up to max_local_frames frames per call (7500: ten minutes) with no quadratic
  // term. 0 builds none. A checkpoint trained with local attention uses its own window in encode
  // (and gets neither encode_local nor encode_batch).
  int64_t local_window = 128;
  int64_t max_local_frames = 7500;
  // Full attention over longer audio in one call: an encode_long method of up to this many
  // encoder frames (7500: ten minutes), W_pos applied to its positions in every call (a table of
  // 2 max_long_frames - 1 rows; none projected when built). Its scratch arena grows with the
  // frames (3.93 GB at 7500 for the 0.6B model), allocated on first use; the
  // runner takes it for a file over max_encoder_frames when the device has that memory free,
  // else encodes the file in chunks. At most max_encoder_frames (e.g. 0) builds none.
  int64_t max_long_frames = 7500;
  // Storage of the linear (matrix) weights: f32, f16 or bf16; nullopt keeps the checkpoint's
  // dtype (f64 becomes f32); the prediction network and the joint's output layer take it too.
  // Convolutions, norms and biases stay f32. f16 also stores the fused attention's q + u, k and v
  // as halves (its position term and output stay f32).
  std::optional<DType> weight_dtype;
};

Result<std::shared_ptr<Program>> build_parakeet_program(const ImportedParakeet& model, const BuildSettings& settings = {});

// A batched encode method's bound: up to `jobs` jobs of up to `frames` encoder frames each.
struct BatchShape {
  int64_t jobs = 1, frames = 0;
};
inline constexpr int64_t kMaxBatchJobs = 64;
inline constexpr int64_t kMinBatchFrames = 32;  // the shortest batched method's bound (2.56 s)
// The batched methods a build makes, longest first: max_batch x max_encoder_frames, then twice
// the jobs at half the frames while jobs stay within kMaxBatchJobs and frames at least
// kMinBatchFrames. None when max_batch is 1.
std::vector<BatchShape> batch_shapes(const BuildSettings& settings);
// "encode_batch" for the full length, "encode_batch_<frames>" for the shorter ones.
std::string batch_method_name(const BatchShape& shape, int64_t max_encoder_frames);

// What a runner reads back from a program's metadata.
struct ProgramInfo {
  ParakeetConfig config;
  Vocabulary vocab;
  std::string preprocessor_json;
  int64_t max_encoder_frames = 0;
  std::vector<BatchShape> batch_shapes;  // the batched methods, longest first (empty: none)
  // encode_local's window (frames on either side) and frames per call; 0: the program has none.
  int64_t local_window = 0, max_local_frames = 0;
  int64_t max_long_frames = 0;  // encode_long's frames per call; 0: the program has none
};
Result<ProgramInfo> info_from_program(const Program& p);

}  // namespace vrun::parakeet
