// Continuous batching over a LlamaRunner whose program has the batched methods
// (models/llama/llama_batch.h; LoadOptions::batch_slots > 0): sequences join and leave between
// steps, each in a KV-cache slot of its own, and every step advances all of them by one token
// with one decode_batch call. At temperature 0 each sequence's tokens are those that
// LlamaRunner::generate gives for it alone.
//
// An engine's loop: add() a request whenever a slot is free (free_slots() > 0); call step() while
// !idle(); take_finished() after each step; cancel() a request whose client left. Text streams
// through each sequence's callback during step(), as generate's does; a callback ends its own
// sequence by returning false (it must not call the session). One thread drives a session, and
// the runner's own methods are not called while it runs.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/llama/llama_runner.h"
#include "runtime/base/thread_pool.h"

namespace vrun::llama {

struct BatchOptions {
  // Prompt tokens prefilled per step, over one or more sequences (0: the program's chunk); a
  // running stream waits at most that many tokens' prefill per token. Chunks as large as generate's (the program's chunk) give the same
  // numbers as generate.
  int64_t prefill_chunk = 0;
  // Decode with at least this many rows (the smallest decode_batch_B with B >= it): what the
  // extra rows of a larger method cost can be measured with it. 0: as few as cover the busy slots.
  int64_t min_rows = 0;
  // Keep each slot's whole prefilled chunks after its sequence ends, and start a new sequence
  // whose prompt begins with them in that slot past them (see add()).
  bool reuse_prompts = true;
};

struct BatchFinished {
  int id = 0;
  GenerateStats stats;  // stop_reason also "cancelled" (cancel())
};

class BatchSession {
 public:
  using TextCallback = std::function<bool(const std::string&)>;  // returning false ends the sequence

  // The session borrows the runner (whose single-sequence cache it does not touch).
  static Result<std::unique_ptr<BatchSession>> create(LlamaRunner& runner, const BatchOptions& options = {});
  ~BatchSession();

  // A new sequence, prefilled over the next steps; returns its id. Fails when no slot is free or
  // the prompt does not fit a slot. It takes the free slot whose last sequence's prompt shares the
  // most whole chunks with this one (prefill chunks start at multiples of the chunk, as in
  // generate), and is prefilled from the first chunk it does not share: those keys and values are
  // what its own chunks would compute, bit for bit (the same tokens, positions and chunk), so its
  // tokens stay generate's. A chat's next turn skips the history's whole chunks this way. Else a
  // free slot within the rows the decode steps already run, the one keeping the fewest chunks
  // (the others' stay for their next turns), else the lowest free slot. (Rows of a decode step
  // without a sequence write at their slot's last position, which no kept chunk covers.)
  Result<int> add(std::vector<int32_t> prompt, const GenerateOptions& options, TextCallback on_text);
  // Ends a sequence now and frees its slot; it is reported by take_finished().
  Status cancel(int id);
  // Prefill chunks of the sequences waiting longest, one chunk's worth of tokens in all (each
  // sequence's prompt in the chunks generate feeds), then one decode_batch call for every
  // sequence that has finished its prefill. Does nothing when idle.
  Status step();
  // Sequences that ended since the last call.
  std::vector<BatchFinished> take_finished();
  // Runs every decode_batch_B once and prefill_slot at a few prompt lengths, with no sequence
  // in any slot (what they write there, each slot's next write overwrites), so that a GPU builds
  // the pipelines and recordings of every batch size before the first request needs them. Only
  // while idle() (an error otherwise); returns the methods' calls made.
  Result<int> warm_up();

  int slots() const { return static_cast<int>(slot_seq_.size()); }
  int free_slots() const;
  int running() const { return static_cast<int>(seqs_.size()); }
  bool idle() const { return seqs_.empty(); }
  int64_t slot_context() const { return slot_context_; }
  // Rows of the last decode_batch call (the smallest method covering the highest busy slot).
  int64_t last_rows() const { return last_rows_; }
  // Sequences the last step decoded a token for (0: the step only prefilled).
  int last_batch() const { return last_batch_; }
  // Seconds the last step() spent on prompt chunks (prefill_slot calls) before its decode.
  double last_prefill_seconds() const { return last_prefill_s_; }
  // Seconds spent in decode_batch calls and in sampling their rows since the session began
  // (benchmarks split a step's time with these).
  double decode_call_seconds() const { return decode_call_s_; }
  double sample_seconds() const { return sample_s_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Seq;
  explicit BatchSession(LlamaRunner& runner);
  // Samples from logits as one iteration of generate's loop; false when the sequence ended.
  bool advance(Seq& s, std::span<const float> logits);
  // The same with the token already sampled (-1 where the sequence had reached its max_tokens).
  bool advance_with(Seq& s, int32_t next);
  // The rows of the decode_batch method a step runs while `highest` is the highest slot with a
  // sequence decoding (at least min_rows).
  int64_t step_rows(int highest) const;
  // Whether the sequence has generated its max_tokens (advance ends it without sampling).
  static bool at_limit(const Seq& s);
  void finish(int id, const std::string& reason);
  // One decode_batch_B call, B = tokens.size() (one entry per row in each vector); fetch as
  // Executor::run's.
  Result<std::vector<TensorView>> run_decode(std::vector<int32_t>& tokens, std::vector<int32_t>& positions,
                                             std::vector<int32_t>& cache_rows, uint64_t fetch);

  LlamaRunner& runner_;
  int64_t slot_context_ = 0, chunk_ = 0, last_rows_ = 0, min_rows_ = 0;
  // Whether the batched methods output each row's greedy token (has_greedy_output).
  bool has_next_ = false;
  // Executor::run's fetch for a call whose rows are all greedy: the tokens alone.
  uint64_t fetch_greedy() const { return has_next_ ? kFetchGreedy : Executor::kFetchAll; }
  std::vector<int64_t> rows_;     // decode_batch_B methods, ascending
  std::vector<int> slot_seq_;     // per slot: the sequence id, -1 when free
  // per slot: the prompt tokens of the whole chunks its last sequence prefilled there (reusable)
  std::vector<std::vector<int32_t>> slot_chunks_;
  bool reuse_prompts_ = true;
  std::map<int, std::unique_ptr<Seq>> seqs_;
  std::vector<BatchFinished> finished_;
  int next_id_ = 1;
  int last_batch_ = 0;
  double last_prefill_s_ = 0;
  double decode_call_s_ = 0, sample_s_ = 0;
  // Samples the rows of wide steps in parallel (made at the first such step).
  std::unique_ptr<ThreadPool> sample_pool_;
};

}  // namespace vrun::llama
