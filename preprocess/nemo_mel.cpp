#include "preprocess/nemo_mel.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

namespace vrun::preprocess {
namespace {

using json = nlohmann::json;
// Frames per block of the statistics pass: large enough that each block keeps the thread pool
// busy (log-mel and sums), small enough (4 MB at 128 mels) to bound its memory.
constexpr int64_t kBlockFrames = 8192;
constexpr double kStdGuard = 1e-5;  // NeMo's CONSTANT added to the std

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  const size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

// A YAML scalar as JSON: numbers, booleans, null, quoted or bare strings.
json yaml_scalar(std::string v) {
  const size_t hash = v.find(" #");
  if (hash != std::string::npos && v[0] != '"' && v[0] != '\'') v = trim(v.substr(0, hash));
  if (v.empty() || v == "null" || v == "~" || v == "None") return nullptr;
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) return v.substr(1, v.size() - 2);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (end && *end == '\0') {
    if (v.find_first_of(".eE") == std::string::npos) return static_cast<int64_t>(d);
    return d;
  }
  return v;
}

// The flat `preprocessor:` mapping of a model_config.yaml (NeMo writes it with OmegaConf: one
// `key: scalar` per line, indented under the top-level key).
Result<json> yaml_preprocessor(const std::string& text, const std::string& source) {
  std::istringstream in(text);
  std::string line;
  bool inside = false;
  size_t indent = std::string::npos;
  json out = json::object();
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const size_t lead = line.find_first_not_of(' ');
    if (!inside) {
      if (lead == 0 && t == "preprocessor:") inside = true;
      continue;
    }
    if (lead == 0) break;
    if (indent == std::string::npos) indent = lead;
    if (lead != indent) continue;  // nested mappings are not preprocessor parameters
    const size_t colon = t.find(':');
    if (colon == std::string::npos) continue;
    out[trim(t.substr(0, colon))] = yaml_scalar(trim(t.substr(colon + 1)));
  }
  if (!inside) return err(ErrorCode::kInvalidArgument, source, ": no top-level 'preprocessor:' block found");
  return out;
}

Result<double> number(const json& j, const std::string& key, const std::string& source) {
  if (!j.is_number()) return err(ErrorCode::kInvalidArgument, source, ": preprocessor.", key, " must be a number, got ", j.dump());
  return j.get<double>();
}

}  // namespace

NemoMelConfig NemoMelConfig::parakeet(int features) {
  NemoMelConfig c;
  c.win_length = 400;
  c.hop_length = 160;
  c.n_fft = 512;
  c.features = features;
  c.pad_to = 0;
  return c;
}

namespace {
Result<NemoMelConfig> parse_object(const json& p, const std::string& source);
}

Result<NemoMelConfig> NemoMelConfig::parse(const std::string& text, const std::string& source) {
  json p;
  const std::string t = trim(text);
  if (!t.empty() && t[0] == '{') {
    try {
      p = json::parse(t);
    } catch (const json::exception& e) {
      return err(ErrorCode::kInvalidArgument, source, ": invalid JSON: ", e.what());
    }
    if (p.contains("preprocessor")) p = p["preprocessor"];
    if (!p.is_object()) return err(ErrorCode::kInvalidArgument, source, ": preprocessor config is not an object");
  } else {
    VRUN_ASSIGN_OR_RETURN(p, yaml_preprocessor(text, source));
  }
  // A key of the wrong type (a string where a number belongs) makes nlohmann throw; it is
  // reported as an error value like every other bad key.
  try {
    return parse_object(p, source);
  } catch (const json::exception& e) {
    return err(ErrorCode::kInvalidArgument, source, ": a preprocessor key has the wrong type: ", e.what());
  }
}

namespace {
Result<NemoMelConfig> parse_object(const json& p, const std::string& source) {
  if (p.contains("_target_") && p["_target_"].is_string() &&
      p["_target_"].get<std::string>().find("AudioToMelSpectrogramPreprocessor") == std::string::npos)
    return err(ErrorCode::kUnsupported, source, ": preprocessor is ", p["_target_"].get<std::string>(),
               ", only AudioToMelSpectrogramPreprocessor is computed");

  NemoMelConfig c;
  auto has = [&](const char* k) { return p.contains(k) && !p[k].is_null(); };
  auto num = [&](const char* k, double& dst) -> Status {
    if (!has(k)) return Status::ok();
    VRUN_ASSIGN_OR_RETURN(dst, number(p[k], k, source));
    return Status::ok();
  };
  double sr = c.sample_rate, window_size = 0.02, window_stride = 0.01, n_fft = 0, features = c.features;
  double preemph = c.preemph, lowfreq = 0, highfreq = 0, pad_value = 0, mag_power = 2, dither = c.dither, splice = 1;
  VRUN_RETURN_IF_ERROR(num("sample_rate", sr));
  VRUN_RETURN_IF_ERROR(num("window_size", window_size));
  VRUN_RETURN_IF_ERROR(num("window_stride", window_stride));
  VRUN_RETURN_IF_ERROR(num("n_fft", n_fft));
  VRUN_RETURN_IF_ERROR(num("features", features));
  VRUN_RETURN_IF_ERROR(num("lowfreq", lowfreq));
  VRUN_RETURN_IF_ERROR(num("highfreq", highfreq));
  VRUN_RETURN_IF_ERROR(num("pad_value", pad_value));
  VRUN_RETURN_IF_ERROR(num("mag_power", mag_power));
  VRUN_RETURN_IF_ERROR(num("dither", dither));
  VRUN_RETURN_IF_ERROR(num("frame_splicing", splice));
  if (p.contains("preemph")) {
    if (p["preemph"].is_null()) preemph = 0;
    else VRUN_RETURN_IF_ERROR(num("preemph", preemph));
  }
  c.sample_rate = static_cast<int>(sr);
  // NeMo truncates with int(), e.g. int(0.025 * 16000) = 400.
  c.win_length = has("n_window_size") ? p["n_window_size"].get<int>() : static_cast<int>(window_size * sr);
  c.hop_length = has("n_window_stride") ? p["n_window_stride"].get<int>() : static_cast<int>(window_stride * sr);
  if (c.win_length <= 0 || c.hop_length <= 0)
    return err(ErrorCode::kInvalidArgument, source, ": window length ", c.win_length, " and hop ", c.hop_length,
               " samples must both be positive");
  c.n_fft = n_fft > 0 ? static_cast<int>(n_fft) : 1 << static_cast<int>(std::ceil(std::log2(c.win_length)));
  c.features = static_cast<int>(features);
  c.preemph = static_cast<float>(preemph);
  c.lowfreq = lowfreq;
  c.highfreq = highfreq;
  c.pad_value = static_cast<float>(pad_value);
  c.mag_power = static_cast<float>(mag_power);
  c.dither = static_cast<float>(dither);

  if (has("window")) {
    const std::string w = p["window"].get<std::string>();
    if (w == "hann") c.window = WindowKind::kHann;
    else if (w == "hamming") c.window = WindowKind::kHamming;
    else if (w == "blackman") c.window = WindowKind::kBlackman;
    else if (w == "bartlett") c.window = WindowKind::kBartlett;
    else c.window = WindowKind::kOnes;  // NeMo passes no window to torch.stft for any other name
  }
  if (p.contains("normalize")) {
    const json& n = p["normalize"];
    if (n.is_null() || (n.is_boolean() && !n.get<bool>())) c.normalize = NemoMelConfig::Normalize::kNone;
    else if (n.is_string() && n.get<std::string>() == "per_feature") c.normalize = NemoMelConfig::Normalize::kPerFeature;
    else if (n.is_string() && n.get<std::string>() == "all_features") c.normalize = NemoMelConfig::Normalize::kAllFeatures;
    else return err(ErrorCode::kUnsupported, source, ": preprocessor.normalize ", n.dump(), " is not per_feature, all_features or null");
  }
  if (has("log")) c.log = p["log"].get<bool>();
  if (has("log_zero_guard_type")) {
    const std::string g = p["log_zero_guard_type"].get<std::string>();
    if (g == "add") c.log_guard_type = NemoMelConfig::LogGuard::kAdd;
    else if (g == "clamp") c.log_guard_type = NemoMelConfig::LogGuard::kClamp;
    else return err(ErrorCode::kInvalidArgument, source, ": preprocessor.log_zero_guard_type '", g, "' is not add or clamp");
  }
  if (has("log_zero_guard_value")) {
    const json& g = p["log_zero_guard_value"];
    if (g.is_string() && g.get<std::string>() == "tiny") c.log_guard = FLT_MIN;
    else if (g.is_string() && g.get<std::string>() == "eps") c.log_guard = FLT_EPSILON;
    else if (g.is_number()) c.log_guard = g.get<float>();
    else return err(ErrorCode::kInvalidArgument, source, ": preprocessor.log_zero_guard_value ", g.dump(), " is not a number, tiny or eps");
  }
  if (has("pad_to")) {
    if (!p["pad_to"].is_number_integer())
      return err(ErrorCode::kUnsupported, source, ": preprocessor.pad_to ", p["pad_to"].dump(), " (only integer pad_to is computed)");
    c.pad_to = p["pad_to"].get<int>();
  }
  if (has("mel_norm")) {
    if (p["mel_norm"].is_string() && p["mel_norm"].get<std::string>() == "slaney") c.mel_norm_slaney = true;
    else return err(ErrorCode::kUnsupported, source, ": preprocessor.mel_norm ", p["mel_norm"].dump(), " (slaney or null)");
  } else if (p.contains("mel_norm")) {
    c.mel_norm_slaney = false;
  }
  if (splice != 1) return err(ErrorCode::kUnsupported, source, ": preprocessor.frame_splicing ", splice, " (only 1 is computed)");
  if (has("exact_pad") && p["exact_pad"].get<bool>())
    return err(ErrorCode::kUnsupported, source, ": preprocessor.exact_pad true (only centred STFT frames are computed)");
  if (c.win_length > c.n_fft)
    return err(ErrorCode::kInvalidArgument, source, ": window length ", c.win_length, " exceeds n_fft ", c.n_fft);
  if (c.features < 1) return err(ErrorCode::kInvalidArgument, source, ": preprocessor.features must be >= 1, got ", c.features);
  return c;
}
}  // namespace

Result<NemoMelSpectrogram> NemoMelSpectrogram::create(const NemoMelConfig& config) {
  StftConfig stft;
  stft.n_fft = config.n_fft;
  stft.hop = config.hop_length;
  stft.window = make_window(config.window, config.win_length, /*periodic=*/false);
  stft.pad = CenterPad::kZero;
  stft.preemph = config.preemph;
  stft.mag_power = config.mag_power;
  MelFilterbankConfig mel;
  mel.sample_rate = config.sample_rate;
  mel.n_fft = config.n_fft;
  mel.n_mels = config.features;
  mel.f_min = config.lowfreq;
  mel.f_max = config.highfreq > 0 ? config.highfreq : config.sample_rate / 2.0;
  mel.slaney_norm = config.mel_norm_slaney;
  VRUN_ASSIGN_OR_RETURN(StftMel s, StftMel::create(std::move(stft), mel));
  NemoMelSpectrogram n;
  n.config_ = config;
  n.stft_ = std::make_shared<const StftMel>(std::move(s));
  return n;
}

int64_t NemoMelSpectrogram::output_frames(int64_t n_samples) const {
  const int64_t t = stft_frames(n_samples);
  if (config_.pad_to <= 0 || t % config_.pad_to == 0) return t;
  return t + config_.pad_to - t % config_.pad_to;
}

void NemoMelSpectrogram::log_frames(const StftMel& stft, const NemoMelConfig& c, std::span<const float> samples,
                                    int64_t begin, int64_t count, float* out) {
  stft.compute(samples, 0, begin, count, out, count);
  if (!c.log) return;
  const bool add = c.log_guard_type == NemoMelConfig::LogGuard::kAdd;
  const float guard = c.log_guard;
  parallel_ranges(count * stft.n_mels(), 8192, [&](int64_t a, int64_t b) {
    if (add) {
      for (int64_t i = a; i < b; ++i) out[i] = std::log(out[i] + guard);
    } else {
      for (int64_t i = a; i < b; ++i) out[i] = std::log(std::max(out[i], guard));
    }
  });
}

void NemoMelSpectrogram::statistics(const NemoMelConfig& c, int n_mels, const std::vector<double>& shift,
                                    const std::vector<double>& sum, const std::vector<double>& sum_sq, int64_t n,
                                    std::vector<double>& mean, std::vector<double>& inv_std) {
  const size_t groups = c.normalize == NemoMelConfig::Normalize::kPerFeature ? static_cast<size_t>(n_mels) : 1;
  const double count = c.normalize == NemoMelConfig::Normalize::kPerFeature ? static_cast<double>(n)
                                                                              : static_cast<double>(n) * n_mels;
  mean.assign(groups, 0.0);
  inv_std.assign(groups, 1.0);
  for (size_t g = 0; g < groups; ++g) {
    mean[g] = shift[g] + sum[g] / count;
    // One valid frame: torch's std is nan, which NeMo turns into 0 before adding the guard.
    const double var = count > 1 ? std::max(0.0, (sum_sq[g] - sum[g] * sum[g] / count) / (count - 1)) : 0.0;
    inv_std[g] = 1.0 / (std::sqrt(var) + kStdGuard);
  }
}

NemoMelSpectrogram::Stream NemoMelSpectrogram::stream(std::span<const float> samples, int64_t keep_frames) const {
  Stream s;
  s.stft_ = stft_;
  s.config_ = config_;
  s.samples_ = samples;
  const int64_t n = static_cast<int64_t>(samples.size());
  s.valid_ = valid_frames(n);
  s.total_ = output_frames(n);
  if (config_.normalize == NemoMelConfig::Normalize::kNone || s.valid_ == 0) return s;
  const bool per_feature = config_.normalize == NemoMelConfig::Normalize::kPerFeature;
  const int mels = n_mels();
  const size_t groups = per_feature ? static_cast<size_t>(mels) : 1;
  // Sums of (x - shift) with shift = the first frame's value keep the variance free of cancellation.
  std::vector<double> shift(groups), sum(groups, 0.0), sum_sq(groups, 0.0);
  // Kept: the whole log-mel at once ([mels, valid]), its blocks summed as below.
  const bool keep = s.valid_ <= keep_frames;
  std::shared_ptr<std::vector<float>> kept;
  if (keep) {
    kept = std::make_shared<std::vector<float>>(static_cast<size_t>(s.valid_ * mels));
    log_frames(*stft_, config_, samples, 0, s.valid_, kept->data());
  }
  std::vector<float> block(keep ? 0 : static_cast<size_t>(kBlockFrames * mels));
  for (int64_t b = 0; b < s.valid_; b += kBlockFrames) {
    const int64_t count = std::min(kBlockFrames, s.valid_ - b);
    // Row m of the block: `stride` apart, from `first`.
    const float* first = keep ? kept->data() + b : block.data();
    const size_t stride = static_cast<size_t>(keep ? s.valid_ : count);
    if (!keep) log_frames(*stft_, config_, samples, b, count, block.data());
    if (b == 0)
      for (size_t g = 0; g < groups; ++g) shift[g] = first[g * stride];
    // Each mel row's sums over the block (in frame order whatever the threads), added per group
    // in mel order.
    std::vector<double> row_sum(static_cast<size_t>(mels)), row_sq(static_cast<size_t>(mels));
    parallel_ranges(mels, 8, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        const double sh = shift[per_feature ? static_cast<size_t>(m) : 0];
        const float* row = first + static_cast<size_t>(m) * stride;
        double acc = 0, acc_sq = 0;
        for (int64_t t = 0; t < count; ++t) {
          const double d = row[t] - sh;
          acc += d;
          acc_sq += d * d;
        }
        row_sum[static_cast<size_t>(m)] = acc;
        row_sq[static_cast<size_t>(m)] = acc_sq;
      }
    });
    for (int m = 0; m < mels; ++m) {
      const size_t g = per_feature ? static_cast<size_t>(m) : 0;
      sum[g] += row_sum[static_cast<size_t>(m)];
      sum_sq[g] += row_sq[static_cast<size_t>(m)];
    }
  }
  statistics(config_, mels, shift, sum, sum_sq, s.valid_, s.mean_, s.inv_std_);
  s.log_ = std::move(kept);
  return s;
}

Features NemoMelSpectrogram::Stream::frames(int64_t begin, int64_t count) const {
  Features out(stft_->n_mels(), count, config_.pad_value);
  const int64_t lo = std::clamp<int64_t>(begin, 0, valid_);
  const int64_t hi = std::clamp<int64_t>(begin + count, 0, valid_);
  if (hi <= lo) return out;
  const int64_t n = hi - lo;
  // Row m of the log-mel of frames [lo, hi): the kept one's, or computed now.
  std::vector<float> block;
  const float* first = nullptr;
  int64_t stride = n;
  if (log_) {
    first = log_->data() + lo;
    stride = valid_;
  } else {
    block.resize(static_cast<size_t>(n * out.n_mels));
    log_frames(*stft_, config_, samples_, lo, n, block.data());
    first = block.data();
  }
  const bool per_feature = config_.normalize == NemoMelConfig::Normalize::kPerFeature;
  parallel_ranges(out.n_mels, 8, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* row = first + m * stride;
      float* dst = &out.at(m, lo - begin);
      if (config_.normalize == NemoMelConfig::Normalize::kNone) {
        std::copy_n(row, n, dst);
        continue;
      }
      const size_t g = per_feature ? static_cast<size_t>(m) : 0;
      const double mean = mean_[g], inv = inv_std_[g];
      for (int64_t t = 0; t < n; ++t) dst[t] = static_cast<float>((row[t] - mean) * inv);
    }
  });
  return out;
}

Features NemoMelSpectrogram::compute(std::span<const float> samples) const {
  const int64_t n = static_cast<int64_t>(samples.size());
  const int64_t valid = valid_frames(n);
  const int mels = n_mels();
  Features out(mels, output_frames(n), config_.pad_value);
  if (valid == 0) return out;
  // One pass: the valid frames are computed into place, then normalised there.
  std::vector<float> block(static_cast<size_t>(valid * mels));
  log_frames(*stft_, config_, samples, 0, valid, block.data());
  for (int m = 0; m < mels; ++m) std::copy_n(block.data() + static_cast<size_t>(m * valid), valid, &out.at(m, 0));
  if (config_.normalize == NemoMelConfig::Normalize::kNone) return out;
  const bool per_feature = config_.normalize == NemoMelConfig::Normalize::kPerFeature;
  const size_t groups = per_feature ? static_cast<size_t>(mels) : 1;
  std::vector<double> shift(groups), sum(groups, 0.0), sum_sq(groups, 0.0), mean, inv_std;
  for (size_t g = 0; g < groups; ++g) shift[g] = out.at(static_cast<int64_t>(g), 0);
  for (int m = 0; m < mels; ++m) {
    const size_t g = per_feature ? static_cast<size_t>(m) : 0;
    for (int64_t t = 0; t < valid; ++t) {
      const double d = out.at(m, t) - shift[g];
      sum[g] += d;
      sum_sq[g] += d * d;
    }
  }
  statistics(config_, mels, shift, sum, sum_sq, valid, mean, inv_std);
  for (int m = 0; m < mels; ++m) {
    const size_t g = per_feature ? static_cast<size_t>(m) : 0;
    float* row = &out.at(m, 0);
    for (int64_t t = 0; t < valid; ++t) row[t] = static_cast<float>((row[t] - mean[g]) * inv_std[g]);
  }
  return out;
}

}  // namespace vrun::preprocess
