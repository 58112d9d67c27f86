#include "apps/serve/metrics.h"

#include <cstdio>

namespace vrun::serve {
namespace {

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

// Label values from our own names (endpoints, model names): escape what the format reserves.
std::string label(const std::string& key, const std::string& value) {
  std::string out = key + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

void type_line(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  size_t k = 0;
  while (k < bounds_.size() && v > bounds_[k]) ++k;
  ++counts_[k];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  const std::string sep = labels.empty() ? "" : ",";
  uint64_t cumulative = 0;
  for (size_t k = 0; k <= bounds_.size(); ++k) {
    cumulative += counts_[k];
    const std::string le = k < bounds_.size() ? number(bounds_[k]) : "+Inf";
    out += name + "_bucket{" + labels + sep + "le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += name + "_sum" + braces + " " + number(sum_) + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
}

Metrics::PerModel& Metrics::model(const std::string& name) {
  return models_[name];
}

void Metrics::request_done(const std::string& endpoint, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{endpoint, status}];
  auto it = latency_
                .try_emplace(endpoint, std::vector<double>{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5,
                                                           5, 10, 30, 60, 120})
                .first;
  it->second.observe(seconds);
}

void Metrics::tokens(const std::string& name, int64_t prompt, int64_t completion, int64_t cached) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).prompt_tokens += prompt;
  model(name).completion_tokens += completion;
  model(name).cached_prompt_tokens += cached;
}

void Metrics::audio(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).audio_s += seconds;
}

void Metrics::time_to_first_token(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).ttft.observe(seconds);
}

void Metrics::batch(const std::string& name, int size) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).batch.observe(size);
}

void Metrics::step_time(const std::string& name, double seconds, double prefill_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  PerModel& m = model(name);
  m.step.observe(seconds);
  m.step_prefill_s += prefill_seconds;
}

void Metrics::queue_depth(const std::string& name, int64_t depth, int64_t waiting) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).queue_depth = depth;
  model(name).waiting = waiting;
}

void Metrics::slots(const std::string& name, int engine, int64_t busy, int64_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  model(name).slots[engine] = {busy, total};
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  type_line(out, "vrun_requests_total", "counter", "HTTP requests by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out += "vrun_requests_total{" + label("endpoint", key.first) + "," +
           label("status", std::to_string(key.second)) + "} " + std::to_string(n) + "\n";
  type_line(out, "vrun_request_duration_seconds", "histogram",
            "Time from request to the last byte of the response.");
  for (const auto& [endpoint, h] : latency_)
    h.render(out, "vrun_request_duration_seconds", label("endpoint", endpoint));
  type_line(out, "vrun_prompt_tokens_total", "counter", "Prompt tokens read, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_prompt_tokens_total{" + label("model", name) + "} " + std::to_string(m.prompt_tokens) + "\n";
  type_line(out, "vrun_prompt_tokens_cached_total", "counter",
            "Prompt tokens whose keys and values a batch slot kept from an earlier request, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_prompt_tokens_cached_total{" + label("model", name) + "} " + std::to_string(m.cached_prompt_tokens) + "\n";
  type_line(out, "vrun_completion_tokens_total", "counter", "Tokens generated, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_completion_tokens_total{" + label("model", name) + "} " +
           std::to_string(m.completion_tokens) + "\n";
  type_line(out, "vrun_audio_seconds_total", "counter",
            "Seconds of audio transcribed or translated, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_audio_seconds_total{" + label("model", name) + "} " + number(m.audio_s) + "\n";
  type_line(out, "vrun_queue_depth", "gauge", "Requests queued or running, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_queue_depth{" + label("model", name) + "} " + std::to_string(m.queue_depth) + "\n";
  type_line(out, "vrun_queue_waiting", "gauge", "Requests queued and not yet taken by the model's worker, by model.");
  for (const auto& [name, m] : models_)
    out += "vrun_queue_waiting{" + label("model", name) + "} " + std::to_string(m.waiting) + "\n";
  // Sums over a model's engines (one per device it is served on).
  auto slot_sum = [](const PerModel& m, bool busy) {
    int64_t n = 0;
    for (const auto& [engine, bt] : m.slots) n += busy ? bt.first : bt.second;
    return std::to_string(n);
  };
  type_line(out, "vrun_slots_busy", "gauge", "KV-cache slots holding a request, by batching text model.");
  for (const auto& [name, m] : models_)
    if (!m.slots.empty()) out += "vrun_slots_busy{" + label("model", name) + "} " + slot_sum(m, true) + "\n";
  type_line(out, "vrun_slots_total", "gauge", "KV-cache slots (--parallel on each device), by batching text model.");
  for (const auto& [name, m] : models_)
    if (!m.slots.empty()) out += "vrun_slots_total{" + label("model", name) + "} " + slot_sum(m, false) + "\n";
  type_line(out, "vrun_batch_size", "histogram",
            "Requests advanced together by one step of a model's worker (text: one decode step).");
  for (const auto& [name, m] : models_) m.batch.render(out, "vrun_batch_size", label("model", name));
  type_line(out, "vrun_step_seconds", "histogram",
            "Wall time of one step of a batching text model's worker: its prefill chunks and one decode.");
  for (const auto& [name, m] : models_)
    if (m.step.count() > 0) m.step.render(out, "vrun_step_seconds", label("model", name));
  type_line(out, "vrun_step_prefill_seconds_total", "counter",
            "Of vrun_step_seconds, the time in prompt chunks (the rest: decode steps), by batching text model.");
  for (const auto& [name, m] : models_)
    if (m.step.count() > 0) out += "vrun_step_prefill_seconds_total{" + label("model", name) + "} " + number(m.step_prefill_s) + "\n";
  type_line(out, "vrun_time_to_first_token_seconds", "histogram",
            "Time from a text request's arrival to its first token.");
  for (const auto& [name, m] : models_)
    m.ttft.render(out, "vrun_time_to_first_token_seconds", label("model", name));
  return out;
}

}  // namespace vrun::serve
