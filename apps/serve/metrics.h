// Counters, gauges and histograms for GET /metrics, rendered in the Prometheus text format
// (version 0.0.4). One mutex: updates are a few per request, far from the decode loop's rate.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vrun::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds)
      : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends the _bucket, _sum and _count lines of `name` with `labels` ("" or `key="v"`).
  void render(std::string& out, const std::string& name, const std::string& labels) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class Metrics {
 public:
  void request_done(const std::string& endpoint, int status, double seconds);
  // cached: of the prompt tokens, those a batch slot kept from an earlier request (not computed).
  void tokens(const std::string& model, int64_t prompt, int64_t completion, int64_t cached = 0);
  void audio(const std::string& model, double seconds);
  void time_to_first_token(const std::string& model, double seconds);
  // Requests advanced together by one step of a model's worker (a decode step of the text engine).
  void batch(const std::string& model, int size);
  // The wall time of one step of a batching text model's worker (its prefill chunks and decode),
  // and of that the prompt chunks'.
  void step_time(const std::string& model, double seconds, double prefill_seconds);
  // Requests queued or running, and of those the ones still waiting for the worker.
  void queue_depth(const std::string& model, int64_t depth, int64_t waiting);
  // KV-cache slots of one engine (device) of a batching text model: busy (a request in it) and
  // all; the metrics show each model's sums.
  void slots(const std::string& model, int engine, int64_t busy, int64_t total);
  std::string render() const;

 private:
  struct PerModel {
    int64_t prompt_tokens = 0, completion_tokens = 0, cached_prompt_tokens = 0, queue_depth = 0, waiting = 0;
    std::map<int, std::pair<int64_t, int64_t>> slots;  // per engine: busy, total (empty: not a batching model)
    double audio_s = 0, step_prefill_s = 0;
    Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}};
    Histogram batch{{1, 2, 4, 8, 16, 32, 64}};
    Histogram step{{0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2}};  // rendered once observed (batching text models)
  };
  PerModel& model(const std::string& name);
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::map<std::string, Histogram> latency_;  // per endpoint
  std::map<std::string, PerModel> models_;
};

}  // namespace vrun::serve
