#include "apps/llama/batch_session.h"

#include "apps/llama/stop_text.h"

#include <algorithm>

namespace vrun::llama {

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

struct BatchSession::Seq {
  int id = 0, slot = 0;
  std::vector<int32_t> prompt;
  size_t prefilled = 0;
  GenerateOptions options;
  TextCallback on_text;
  Sampler sampler;
  tok::StreamingDecoder decoder;
  std::vector<int32_t> history;
  StopText text{options.stop, &on_text};  // after options and on_text, which it refers to
  GenerateStats st;
  int64_t n_past = 0;
  int32_t next = -1;  // the token to decode next; -1 while prefilling
  Clock::time_point added, first_sample;
  Seq(const GenerateOptions& o, const tok::Tokenizer& t) : options(o), sampler(o.sampling), decoder(t, /*skip_special=*/true) {}

};

Result<std::unique_ptr<BatchSession>> BatchSession::create(LlamaRunner& runner, const BatchOptions& options) {
  const Program& p = runner.program();
  const MetaValue* slots = p.meta("vrun.batch_slots");
  const MetaValue* ctx = p.meta("vrun.batch_context");
  const MetaValue* rows = p.meta("vrun.batch_rows");
  if (!slots || !ctx || !rows || slots->i <= 0 || rows->ints.empty() || !p.method("prefill_slot"))
    return err(ErrorCode::kInvalidArgument, "the program has no batched methods (build it from its checkpoint with batch slots)");
  std::unique_ptr<BatchSession> s(new BatchSession(runner));
  s->slot_context_ = ctx->i;
  s->rows_ = rows->ints;
  std::sort(s->rows_.begin(), s->rows_.end());
  for (int64_t b : s->rows_)
    if (!p.method("decode_batch_" + std::to_string(b)))
      return err(ErrorCode::kInvalidProgram, p.source, ": no method decode_batch_", b, " for vrun.batch_rows");
  if (s->rows_.back() < slots->i) return err(ErrorCode::kInvalidProgram, p.source, ": batch rows do not cover ", slots->i, " slots");
  s->has_next_ = has_greedy_output(p, "prefill_slot");
  for (int64_t b : s->rows_) s->has_next_ = s->has_next_ && has_greedy_output(p, "decode_batch_" + std::to_string(b));
  s->slot_seq_.assign(static_cast<size_t>(slots->i), -1);
  s->slot_chunks_.assign(static_cast<size_t>(slots->i), {});
  s->reuse_prompts_ = options.reuse_prompts;
  const int64_t most = std::min(runner.chunk_, s->slot_context_);
  s->min_rows_ = options.min_rows;
  s->chunk_ = options.prefill_chunk > 0 ? std::min(options.prefill_chunk, most) : most;
  return s;
}

BatchSession::BatchSession(LlamaRunner& runner) : runner_(runner) {}
BatchSession::~BatchSession() = default;

int BatchSession::free_slots() const {
  return static_cast<int>(std::count(slot_seq_.begin(), slot_seq_.end(), -1));
}

Result<int> BatchSession::add(std::vector<int32_t> prompt, const GenerateOptions& options, TextCallback on_text) {
  if (prompt.empty()) return err(ErrorCode::kInvalidArgument, "the prompt is empty (nothing to continue from)");
  if (static_cast<int64_t>(prompt.size()) > slot_context_)
    return err(ErrorCode::kInvalidArgument, "the prompt's ", prompt.size(), " tokens exceed the ", slot_context_, "-token context of a slot");
  const int64_t vocab = runner_.config().vocab;
  for (int32_t t : prompt)
    if (t < 0 || t >= vocab) return err(ErrorCode::kInvalidArgument, "token id ", t, " outside the vocabulary of ", vocab);
  // The free slot with the most whole chunks of this prompt (one token at least left to prefill,
  // whose logits come from the last chunk). Else a free slot among the rows the decode steps run
  // already (the highest busy slot's method), the one keeping the fewest chunks, so that others'
  // kept chunks stay for their next turns; else the lowest free slot.
  int highest = -1;
  for (size_t b = 0; b < slot_seq_.size(); ++b)
    if (slot_seq_[b] != -1) highest = static_cast<int>(b);
  const int64_t covered = highest < 0 ? 0 : step_rows(highest);
  int slot = -1;
  for (size_t b = 0; b < slot_seq_.size(); ++b) {
    if (slot_seq_[b] != -1) continue;
    if (slot < 0 || (static_cast<int64_t>(b) < covered && slot_chunks_[b].size() < slot_chunks_[static_cast<size_t>(slot)].size()))
      slot = static_cast<int>(b);
  }
  size_t reuse = 0;
  for (size_t b = 0; b < slot_seq_.size() && reuse_prompts_ && options.cache_prompt; ++b) {
    if (slot_seq_[b] != -1) continue;
    const std::vector<int32_t>& kept = slot_chunks_[b];
    const size_t most = std::min(kept.size(), prompt.size() - 1);
    const size_t same = static_cast<size_t>(std::mismatch(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(most),
                                                          prompt.begin()).first - kept.begin());
    const size_t whole = same / static_cast<size_t>(chunk_) * static_cast<size_t>(chunk_);
    if (whole > reuse) {
      reuse = whole;
      slot = static_cast<int>(b);
    }
  }
  if (slot < 0) return err(ErrorCode::kOutOfMemory, "all ", slot_seq_.size(), " batch slots are busy");
  slot_chunks_[static_cast<size_t>(slot)].resize(reuse);  // the new sequence writes past them
  auto s = std::make_unique<Seq>(options, runner_.tokenizer());
  s->id = next_id_++;
  s->slot = slot;
  s->prefilled = reuse;
  s->n_past = static_cast<int64_t>(reuse);
  s->st.cached_prompt_tokens = static_cast<int>(reuse);
  s->history = prompt;
  s->prompt = std::move(prompt);
  s->on_text = on_text ? std::move(on_text) : TextCallback([](const std::string&) { return true; });
  s->st.prompt_tokens = static_cast<int>(s->prompt.size());
  s->added = Clock::now();
  slot_seq_[static_cast<size_t>(slot)] = s->id;
  const int id = s->id;
  seqs_[id] = std::move(s);
  return id;
}

void BatchSession::finish(int id, const std::string& reason) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = *it->second;
  if (!reason.empty()) s.st.stop_reason = reason;
  if (s.st.stop_reason != "stop" && s.st.stop_reason != "callback" && s.st.stop_reason != "cancelled") {
    s.text.push(s.decoder.finish());
    s.text.flush(true, &s.st.stop_reason);
  }
  if (s.st.generated_tokens > 0) s.st.decode_s = seconds_between(s.first_sample, Clock::now());
  slot_seq_[static_cast<size_t>(s.slot)] = -1;
  // The whole chunks it prefilled stay for the next sequence in the slot, short of the slot's
  // last position (where rows without a sequence write).
  const size_t kept = std::min(s.prefilled, static_cast<size_t>(slot_context_ - 1)) / static_cast<size_t>(chunk_) *
                      static_cast<size_t>(chunk_);
  slot_chunks_[static_cast<size_t>(s.slot)].assign(s.prompt.begin(), s.prompt.begin() + static_cast<std::ptrdiff_t>(kept));
  finished_.push_back({id, std::move(s.st)});
  seqs_.erase(it);
}

Status BatchSession::cancel(int id) {
  if (!seqs_.count(id)) return err(ErrorCode::kNotFound, "no running sequence ", id);
  finish(id, "cancelled");
  return Status::ok();
}

std::vector<BatchFinished> BatchSession::take_finished() {
  std::vector<BatchFinished> out;
  out.swap(finished_);
  return out;
}

Result<std::vector<TensorView>> BatchSession::run_decode(std::vector<int32_t>& tokens, std::vector<int32_t>& positions,
                                                         std::vector<int32_t>& cache_rows, uint64_t fetch) {
  const auto rows = static_cast<int64_t>(tokens.size());
  const std::string method = "decode_batch_" + std::to_string(rows);
  std::vector<TensorView> inputs{TensorView::dense(tokens.data(), DType::i32, {1, rows}),
                                 TensorView::dense(positions.data(), DType::i32, {rows})};
  // Programs built before the cache write took one row per sequence have no cache_rows input.
  Executor& ex = *runner_.executor_;
  if (ex.program().method(method)->inputs.size() > 2)
    inputs.push_back(TensorView::dense(cache_rows.data(), DType::i32, {rows}));
  return ex.run(method, inputs, {}, fetch);
}

Result<int> BatchSession::warm_up() {
  if (!idle()) return err(ErrorCode::kInvalidArgument, "warm_up() with sequences running");
  Executor& ex = *runner_.executor_;
  int calls = 0;
  // Prompt lengths that take different kernels (one row, a few rows, the rows kernel or a short
  // chunk's split tensor-core tiles, whole tiles), and a whole chunk.
  std::vector<int32_t> prompt(static_cast<size_t>(chunk_), 0);
  for (int64_t n : {int64_t{1}, int64_t{8}, int64_t{32}, int64_t{48}, int64_t{128}, chunk_}) {
    if (n > chunk_ || n > slot_context_) continue;
    VRUN_RETURN_IF_ERROR(ex.run("prefill_slot", {TensorView::dense(prompt.data(), DType::i32, {1, n})},
                                {{"pos", 0}, {"slot", 0}})
                             .status());
    ++calls;
  }
  for (int64_t rows : rows_) {
    std::vector<int32_t> tokens(static_cast<size_t>(rows), 0), positions(static_cast<size_t>(rows), 0);
    std::vector<int32_t> cache_rows(static_cast<size_t>(rows), 0);
    for (int64_t b = 0; b < rows; ++b) cache_rows[b] = static_cast<int32_t>(b * slot_context_);
    VRUN_RETURN_IF_ERROR(run_decode(tokens, positions, cache_rows, fetch_greedy()).status());
    ++calls;
  }
  for (auto& kept : slot_chunks_) kept.clear();  // written over above
  return calls;
}

int64_t BatchSession::step_rows(int highest) const {
  for (int64_t b : rows_)
    if (b > highest && b >= min_rows_) return b;
  return rows_.back();
}

bool BatchSession::at_limit(const Seq& s) {
  return s.options.max_tokens >= 0 && s.st.generated_tokens >= s.options.max_tokens;
}

bool BatchSession::advance(Seq& s, std::span<const float> logits) {
  return advance_with(s, at_limit(s) ? -1 : s.sampler.sample(logits, s.history));
}

bool BatchSession::advance_with(Seq& s, int32_t next) {
  GenerateStats& st = s.st;
  if (at_limit(s)) {
    st.stop_reason = "length";
    return false;
  }
  if (st.generated_tokens == 0) {
    s.first_sample = Clock::now();
    st.time_to_first_token_s = seconds_between(s.added, s.first_sample);
  }
  ++st.generated_tokens;
  const auto& sp = runner_.tokenizer().special_ids();
  if (!s.options.ignore_eos && (next == sp.eos || next == sp.eot)) {
    st.stop_reason = "eos";
    return false;
  }
  st.tokens.push_back(next);
  s.history.push_back(next);
  s.text.push(s.decoder.push(next));
  if (!s.text.flush(false, &s.st.stop_reason)) return false;
  if (s.n_past >= slot_context_) {
    st.stop_reason = "context";
    return false;
  }
  s.next = next;
  return true;
}

Status BatchSession::step() {
  const int64_t vocab = runner_.config().vocab;
  Executor& ex = *runner_.executor_;
  // Prefill chunks up to one chunk's worth of tokens, in the order the sequences were added: a
  // sequence's chunks are those generate would feed, so its numbers are the same.
  int64_t budget = chunk_;
  last_prefill_s_ = 0;
  for (auto it = seqs_.begin(); it != seqs_.end() && budget > 0;) {
    const int id = it->first;
    Seq& s = *it->second;
    ++it;  // finish() below erases this sequence
    if (s.next >= 0 || s.prefilled >= s.prompt.size()) continue;
    const int64_t n = std::min<int64_t>(chunk_, static_cast<int64_t>(s.prompt.size() - s.prefilled));
    if (n > budget) break;
    const auto t0 = Clock::now();
    const bool last = s.prefilled + static_cast<size_t>(n) == s.prompt.size();
    const bool greedy = has_next_ && s.sampler.greedy();
    const uint64_t fetch = !last ? 0 : greedy ? fetch_greedy() : Executor::kFetchAll;
    VRUN_ASSIGN_OR_RETURN(auto outs, ex.run("prefill_slot",
                                            {TensorView::dense(s.prompt.data() + s.prefilled, DType::i32, {1, n})},
                                            {{"pos", s.n_past}, {"slot", s.slot}}, fetch));
    budget -= n;
    s.prefilled += static_cast<size_t>(n);
    s.n_past += n;
    const double took = seconds_between(t0, Clock::now());
    s.st.prefill_s += took;
    last_prefill_s_ += took;
    if (last) {
      const int32_t token = greedy ? *outs[kGreedyOutput].ptr<int32_t>() : 0;
      if (token < 0) return nan_logits(s.n_past - 1);
      const bool more = greedy ? advance_with(s, at_limit(s) ? -1 : token)
                               : advance(s, std::span<const float>(outs[0].ptr<float>(), static_cast<size_t>(vocab)));
      if (!more) finish(id, "");
    }
  }
  // One decode step for every sequence with a token to decode.
  int highest = -1;
  for (const auto& [id, sp] : seqs_)
    if (sp->next >= 0) highest = std::max(highest, sp->slot);
  last_batch_ = 0;
  if (highest < 0) return Status::ok();
  const int64_t rows = step_rows(highest);
  // A row without a decoding sequence writes at its slot's next position, which the slot's next
  // write overwrites anyway (a prefilling slot's next chunk, a free slot's first).
  std::vector<int32_t> tokens(static_cast<size_t>(rows), 0), positions(static_cast<size_t>(rows), 0);
  std::vector<int32_t> cache_rows(static_cast<size_t>(rows), 0);
  std::vector<Seq*> row_seq(static_cast<size_t>(rows), nullptr);
  for (int64_t b = 0; b < rows; ++b) {
    const int id = slot_seq_[static_cast<size_t>(b)];
    if (id < 0) continue;
    Seq& s = *seqs_.at(id);
    positions[b] = static_cast<int32_t>(std::min(s.n_past, slot_context_ - 1));
    cache_rows[b] = static_cast<int32_t>(b * slot_context_ + positions[b]);
    if (s.next >= 0) {
      tokens[b] = s.next;
      row_seq[b] = &s;
      ++last_batch_;
    }
  }
  for (int64_t b = 0; b < rows; ++b)  // rows without a sequence: their slot's last position
    if (slot_seq_[static_cast<size_t>(b)] < 0) cache_rows[b] = static_cast<int32_t>((b + 1) * slot_context_ - 1);
  last_rows_ = rows;
  // Greedy rows take the model's greedy tokens; the logits come back only for rows that sample.
  bool all_greedy = has_next_;
  for (const Seq* s : row_seq) all_greedy = all_greedy && (!s || s->sampler.greedy());
  const auto t0 = Clock::now();
  VRUN_ASSIGN_OR_RETURN(auto outs, run_decode(tokens, positions, cache_rows, all_greedy ? fetch_greedy() : Executor::kFetchAll));
  const auto t1 = Clock::now();
  const float* lg = all_greedy ? nullptr : outs[0].ptr<float>();
  const int32_t* ids = has_next_ ? outs[kGreedyOutput].ptr<int32_t>() : nullptr;
  for (int64_t b = 0; b < rows && ids; ++b)
    if (row_seq[b] && ids[b] < 0) return nan_logits(row_seq[b]->n_past);
  // Each row's token from its own sampler (on several threads for wide steps: a row of a
  // 49,152-token vocabulary takes tens of microseconds), then the sequences advanced in order.
  std::vector<int32_t> next(static_cast<size_t>(rows), -1);
  auto sample_rows = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      if (Seq* s = row_seq[b]; s && !at_limit(*s))
        next[b] = ids && s->sampler.greedy()
                      ? ids[b]
                      : s->sampler.sample(std::span<const float>(lg + b * vocab, static_cast<size_t>(vocab)), s->history);
  };
  if (all_greedy) {
    sample_rows(0, rows);
  } else if (last_batch_ >= 8) {
    if (!sample_pool_) sample_pool_ = std::make_unique<ThreadPool>(std::min(8, ThreadPool::default_size()));
    sample_pool_->parallel_for(rows, 4, sample_rows);
  } else {
    sample_rows(0, rows);
  }
  for (int64_t b = 0; b < rows; ++b) {
    Seq* s = row_seq[b];
    if (!s) continue;
    ++s->n_past;
    s->next = -1;
    if (!advance_with(*s, next[b])) finish(s->id, "");
  }
  decode_call_s_ += seconds_between(t0, t1);
  sample_s_ += seconds_between(t1, Clock::now());
  return Status::ok();
}

}  // namespace vrun::llama
