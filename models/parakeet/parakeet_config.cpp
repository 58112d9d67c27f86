#include "models/parakeet/parakeet_config.h"

#include "models/common/json_guard.h"

#include <cmath>
#include <sstream>

namespace vrun::parakeet {

using nlohmann::json;

int64_t ParakeetConfig::subsampling_stages() const {
  int64_t n = 0;
  for (int64_t f = subsampling_factor; f > 1; f /= 2) ++n;
  return n;
}

int64_t ParakeetConfig::encoded_length(int64_t n) const {
  for (int64_t s = 0; s < subsampling_stages(); ++s) n = n <= 0 ? 0 : (n - 1) / 2 + 1;
  return n;
}

int64_t ParakeetConfig::subsampled_features() const {
  int64_t f = feat_in;
  for (int64_t i = 0; i < subsampling_stages(); ++i) f = (f + 2 - 3) / 2 + 1;
  return f;
}

Status ParakeetConfig::validate() const {
  const std::pair<const char*, int64_t> sizes[] = {{"feat_in", feat_in}, {"d_model", d_model}, {"n_layers", n_layers},
                                                   {"n_heads", n_heads}, {"ff_dim", ff_dim}, {"conv_kernel_size", conv_kernel},
                                                   {"subsampling_conv_channels", subsampling_channels}, {"vocab_size", vocab_size}};
  for (const auto& [k, v] : sizes)
    if (v <= 0 || v > (int64_t{1} << 24)) return err(ErrorCode::kInvalidArgument, "parakeet config: ", k, " = ", v, " (must be positive)");
  if (d_model % n_heads) return err(ErrorCode::kInvalidArgument, "parakeet config: d_model ", d_model, " does not divide into ", n_heads, " heads");
  if (conv_kernel % 2 == 0) return err(ErrorCode::kUnsupported, "parakeet config: conv_kernel_size ", conv_kernel, " (odd sizes are symmetric)");
  if (subsampling_factor < 2 || (subsampling_factor & (subsampling_factor - 1)))
    return err(ErrorCode::kUnsupported, "parakeet config: subsampling_factor ", subsampling_factor, " (a power of two is needed)");
  if (subsampled_features() <= 0) return err(ErrorCode::kInvalidArgument, "parakeet config: ", feat_in, " features vanish after subsampling");
  if (head == HeadKind::kTdt) {
    if (pred_hidden <= 0 || pred_layers <= 0 || joint_hidden <= 0)
      return err(ErrorCode::kInvalidArgument, "parakeet config: prediction network ", pred_hidden, " x ", pred_layers, ", joint ", joint_hidden,
                 " (must be positive)");
    for (int64_t d : durations)
      if (d < 0 || d > 1000) return err(ErrorCode::kInvalidArgument, "parakeet config: TDT duration ", d);
    if (max_symbols <= 0) return err(ErrorCode::kInvalidArgument, "parakeet config: max_symbols ", max_symbols);
  }
  if (!(window_stride > 0)) return err(ErrorCode::kInvalidArgument, "parakeet config: window_stride ", window_stride);
  if (local_window < 0 || local_window > 100000)
    return err(ErrorCode::kInvalidArgument, "parakeet config: local attention window ", local_window);
  return Status::ok();
}

std::string ParakeetConfig::describe() const {
  std::ostringstream s;
  s << (head == HeadKind::kCtc ? "CTC" : durations.empty() ? "RNN-T" : "TDT") << ", " << n_layers << " layers x " << d_model << " ("
    << n_heads << " heads, ff " << ff_dim << ", conv " << conv_kernel << "), " << feat_in << " mels, vocabulary " << vocab_size;
  if (local_window > 0) s << ", local attention [" << local_window << ", " << local_window << "]";
  if (head == HeadKind::kTdt) {
    s << ", prediction " << pred_layers << " x " << pred_hidden << ", joint " << joint_hidden;
    if (!durations.empty()) {
      s << ", durations";
      for (int64_t d : durations) s << ' ' << d;
    }
  }
  return s.str();
}

namespace {

// Typed access to a JSON config, errors naming the dotted key.
class Reader {
 public:
  Reader(const json& root, std::string source) : root_(root), source_(std::move(source)) {}
  Status status() const { return bad_; }

  const json* find(const std::string& dotted) const {
    const json* j = &root_;
    std::stringstream ss(dotted);
    std::string part;
    while (std::getline(ss, part, '.')) {
      if (!j->is_object() || !j->contains(part)) return nullptr;
      j = &(*j)[part];
    }
    return j;
  }
  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    const json* j = find(key);
    if (!j || j->is_null()) {
      if (fallback) return *fallback;
      fail(ErrorCode::kNotFound, "has no '", key, "'");
      return 0;
    }
    if (j->is_number_integer()) return j->get<int64_t>();
    // A whole float within int64's range (converting one outside it is undefined).
    if (j->is_number_float()) {
      const double v = j->get<double>();
      if (v >= -0x1p63 && v < 0x1p63 && v == std::trunc(v)) return static_cast<int64_t>(v);
    }
    fail(ErrorCode::kInvalidArgument, "'", key, "' is ", j->dump(), ", not an integer");
    return 0;
  }
  double number(const std::string& key, double fallback) {
    return scalar(key, fallback, [](const json& j) { return j.is_number(); }, "a number");
  }
  bool boolean(const std::string& key, bool fallback) {
    return scalar(key, fallback, [](const json& j) { return j.is_boolean(); }, "a boolean");
  }
  std::string string(const std::string& key, const std::string& fallback) {
    return scalar(key, fallback, [](const json& j) { return j.is_string(); }, "a string");
  }
  std::optional<std::vector<int64_t>> ints(const std::string& key) {
    const json* j = find(key);
    if (!j || j->is_null()) return std::nullopt;
    std::vector<int64_t> v;
    if (!j->is_array()) {
      fail(ErrorCode::kInvalidArgument, "'", key, "' is ", j->dump(), ", not a list");
      return v;
    }
    for (const json& x : *j) {
      if (!x.is_number_integer()) {
        fail(ErrorCode::kInvalidArgument, "'", key, "' holds ", x.dump(), ", not an integer");
        return v;
      }
      v.push_back(x.get<int64_t>());
    }
    return v;
  }
  template <typename... A>
  void fail(ErrorCode code, A&&... parts) {
    if (bad_.is_ok()) bad_ = err(code, source_, ": ", parts...);
  }

 private:
  // The value at key when is_kind(value): fallback when it is absent or null, else an error
  // (the value is not `kind`).
  template <typename T, typename Is>
  T scalar(const std::string& key, const T& fallback, Is is_kind, const char* kind) {
    const json* j = find(key);
    if (!j || j->is_null()) return fallback;
    if (is_kind(*j)) return j->get<T>();
    fail(ErrorCode::kInvalidArgument, "'", key, "' is ", j->dump(), ", not ", kind);
    return fallback;
  }

  const json& root_;
  std::string source_;
  Status bad_;
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// A config read by read(r, c, source) from cfg, nlohmann's exceptions turned into errors naming
// the source (json_guard); then r's first error, if any.
Result<ParakeetConfig> read_config(const json& cfg, const std::string& source,
                                   Status (*read)(Reader& r, ParakeetConfig& c, const std::string& source)) {
  return models::json_guard(source, [&]() -> Result<ParakeetConfig> {
    Reader r(cfg, source);
    ParakeetConfig c;
    VRUN_RETURN_IF_ERROR(read(r, c, source));
    VRUN_RETURN_IF_ERROR(r.status());
    return c;
  });
}

Status read_nemo_config(Reader& r, ParakeetConfig& c, const std::string& source);
Status read_hf_config(Reader& r, ParakeetConfig& c, const std::string& source);

}  // namespace

Result<ParakeetConfig> config_from_nemo(const json& cfg, const std::string& source) {
  return read_config(cfg, source, read_nemo_config);
}

Result<ParakeetConfig> config_from_hf(const json& cfg, const std::string& source) {
  return read_config(cfg, source, read_hf_config);
}

namespace {

Status read_nemo_config(Reader& r, ParakeetConfig& c, const std::string& source) {
  if (!r.find("encoder")) return err(ErrorCode::kNotFound, source, ": has no 'encoder' section");
  const std::string enc_target = r.string("encoder._target_", "");
  if (!enc_target.empty() && !contains(enc_target, "ConformerEncoder"))
    return err(ErrorCode::kUnsupported, source, ": encoder is ", enc_target, " (a ConformerEncoder is read)");
  // Defaults are ConformerEncoder's own, so an omitted key means what it means to NeMo.
  c.feat_in = r.integer("encoder.feat_in");
  c.d_model = r.integer("encoder.d_model");
  c.n_layers = r.integer("encoder.n_layers");
  c.n_heads = r.integer("encoder.n_heads", 4);
  c.ff_dim = c.d_model * r.integer("encoder.ff_expansion_factor", 4);
  c.conv_kernel = r.integer("encoder.conv_kernel_size", 31);
  c.subsampling_factor = r.integer("encoder.subsampling_factor", 4);
  c.subsampling_channels = r.integer("encoder.subsampling_conv_channels", -1);
  if (c.subsampling_channels == -1) c.subsampling_channels = c.d_model;
  c.pos_emb_max_len = r.integer("encoder.pos_emb_max_len", 5000);
  c.xscaling = r.boolean("encoder.xscaling", true);
  c.use_bias = r.boolean("encoder.use_bias", true);
  const std::string subsampling = r.string("encoder.subsampling", "striding");
  const std::string attention = r.string("encoder.self_attention_model", "rel_pos");
  const std::string norm = r.string("encoder.conv_norm_type", "batch_norm");
  const bool untie = r.boolean("encoder.untie_biases", true);
  const bool causal = r.boolean("encoder.causal_downsampling", false);
  const int64_t feat_out = r.integer("encoder.feat_out", -1);
  const auto context = r.ints("encoder.att_context_size");
  VRUN_RETURN_IF_ERROR(r.status());
  auto unsupported = [&](const std::string& key, const std::string& value, const char* needed) {
    return err(ErrorCode::kUnsupported, source, ": encoder.", key, " is ", value, " (vrun runs ", needed, ")");
  };
  if (subsampling != "dw_striding") return unsupported("subsampling", subsampling, "dw_striding");
  if (attention != "rel_pos" && attention != "rel_pos_local_attn")
    return unsupported("self_attention_model", attention, "rel_pos or rel_pos_local_attn");
  if (norm != "batch_norm") return unsupported("conv_norm_type", norm, "batch_norm");
  if (!untie) return unsupported("untie_biases", "false", "per-layer position biases");
  if (causal) return unsupported("causal_downsampling", "true", "non-causal subsampling");
  if (feat_out != -1) return unsupported("feat_out", std::to_string(feat_out), "no output projection");
  if (attention == "rel_pos_local_attn") {
    // NeMo's sliding-window attention adds the position scores as if the window were [w, w]
    // whatever the two sizes are, so only symmetric windows are well defined.
    if (!context || context->size() != 2 || (*context)[0] < 1 || (*context)[0] != (*context)[1])
      return unsupported("att_context_size", context && context->size() == 2
                                                 ? "[" + std::to_string((*context)[0]) + ", " + std::to_string((*context)[1]) + "]"
                                                 : std::string("missing"),
                         "rel_pos_local_attn with a symmetric window [w, w], w >= 1");
    c.local_window = (*context)[0];
  } else if (context && !context->empty() && !(context->size() == 2 && (*context)[0] == -1 && (*context)[1] == -1)) {
    return unsupported("att_context_size", "limited", "full-context attention ([-1, -1]) with rel_pos");
  }
  c.window_stride = r.number("preprocessor.window_stride", 0.01);

  const std::string dec_target = r.string("decoder._target_", "");
  if (contains(dec_target, "ConvASRDecoder")) {
    c.head = HeadKind::kCtc;
    c.vocab_size = r.integer("decoder.num_classes");
  } else if (contains(dec_target, "RNNTDecoder")) {
    c.head = HeadKind::kTdt;
    c.vocab_size = r.integer("decoder.vocab_size");
    c.pred_hidden = r.integer("decoder.prednet.pred_hidden");
    c.pred_layers = r.integer("decoder.prednet.pred_rnn_layers");
    c.joint_hidden = r.integer("joint.jointnet.joint_hidden");
    if (!r.boolean("decoder.blank_as_pad", true))
      return err(ErrorCode::kUnsupported, source, ": decoder.blank_as_pad is false (vrun runs blank_as_pad: true)");
    const int64_t joint_classes = r.integer("joint.num_classes");
    const int64_t extra = r.integer("joint.num_extra_outputs", 0);
    auto durations = r.ints("model_defaults.tdt_durations");
    if (!durations) durations = r.ints("decoding.durations");
    if (!durations) durations = r.ints("loss.tdt_kwargs.durations");
    c.durations = durations.value_or(std::vector<int64_t>{});
    c.max_symbols = r.integer("decoding.greedy.max_symbols", 10);
    VRUN_RETURN_IF_ERROR(r.status());
    if (joint_classes != c.vocab_size)
      return err(ErrorCode::kInvalidArgument, source, ": joint.num_classes ", joint_classes, " differs from decoder.vocab_size ", c.vocab_size);
    if (extra != static_cast<int64_t>(c.durations.size()))
      return err(ErrorCode::kInvalidArgument, source, ": joint.num_extra_outputs is ", extra, " but the config lists ", c.durations.size(),
                 " TDT durations");
  } else {
    return err(ErrorCode::kUnsupported, source, ": decoder is '", dec_target, "' (RNNTDecoder for TDT / RNN-T, ConvASRDecoder for CTC)");
  }
  VRUN_RETURN_IF_ERROR(r.status());
  return c.validate().with_context(source);
}

Status read_hf_config(Reader& r, ParakeetConfig& c, const std::string& source) {
  std::string arch;
  if (const json* a = r.find("architectures"); a && a->is_array() && !a->empty() && (*a)[0].is_string()) arch = (*a)[0];
  const std::string model_type = r.string("model_type", "");
  if (contains(arch, "ForCTC") || model_type == "parakeet_ctc") c.head = HeadKind::kCtc;
  else if (contains(arch, "ForTDT") || contains(arch, "ForRNNT") || model_type == "parakeet_tdt" || model_type == "parakeet_rnnt") c.head = HeadKind::kTdt;
  else return err(ErrorCode::kUnsupported, source, ": architecture '", arch, "' / model_type '", model_type, "' is not a Parakeet TDT, RNN-T or CTC model");
  if (!r.find("encoder_config")) return err(ErrorCode::kNotFound, source, ": has no 'encoder_config'");
  // A key the file omits has the value transformers' config class gives it.
  c.d_model = r.integer("encoder_config.hidden_size", 1024);
  c.n_layers = r.integer("encoder_config.num_hidden_layers", 24);
  c.n_heads = r.integer("encoder_config.num_attention_heads", 8);
  c.ff_dim = r.integer("encoder_config.intermediate_size", 4096);
  c.conv_kernel = r.integer("encoder_config.conv_kernel_size", 9);
  c.subsampling_factor = r.integer("encoder_config.subsampling_factor", 8);
  c.subsampling_channels = r.integer("encoder_config.subsampling_conv_channels", 256);
  c.feat_in = r.integer("encoder_config.num_mel_bins", 80);
  c.pos_emb_max_len = r.integer("encoder_config.max_position_embeddings", 5000);
  c.xscaling = r.boolean("encoder_config.scale_input", true);
  const bool att_bias = r.boolean("encoder_config.attention_bias", true);
  const bool conv_bias = r.boolean("encoder_config.convolution_bias", true);
  const int64_t sub_kernel = r.integer("encoder_config.subsampling_conv_kernel_size", 3);
  const int64_t sub_stride = r.integer("encoder_config.subsampling_conv_stride", 2);
  const std::string act = r.string("encoder_config.hidden_act", "silu");
  VRUN_RETURN_IF_ERROR(r.status());
  if (att_bias != conv_bias)
    return err(ErrorCode::kUnsupported, source, ": attention_bias ", att_bias, " differs from convolution_bias ", conv_bias);
  c.use_bias = att_bias;
  if (sub_kernel != 3 || sub_stride != 2)
    return err(ErrorCode::kUnsupported, source, ": subsampling kernel ", sub_kernel, " / stride ", sub_stride, " (3 / 2 is read)");
  if (act != "silu" && act != "swish") return err(ErrorCode::kUnsupported, source, ": encoder hidden_act '", act, "' (silu is read)");
  const int64_t vocab_with_blank = r.integer("vocab_size");
  VRUN_RETURN_IF_ERROR(r.status());
  if (c.head == HeadKind::kCtc) {
    const int64_t blank = r.integer("blank_token_id", vocab_with_blank - 1);
    if (blank != vocab_with_blank - 1)
      return err(ErrorCode::kUnsupported, source, ": CTC blank id ", blank, " is not the last of ", vocab_with_blank, " outputs");
    c.vocab_size = vocab_with_blank - 1;
  } else {
    const int64_t blank = r.integer("blank_token_id");
    VRUN_RETURN_IF_ERROR(r.status());
    if (blank != vocab_with_blank - 1)
      return err(ErrorCode::kUnsupported, source, ": blank_token_id ", blank, " is not the last of vocab_size ", vocab_with_blank);
    c.vocab_size = blank;
    c.pred_hidden = r.integer("decoder_hidden_size", 640);
    c.pred_layers = r.integer("num_decoder_layers", 2);
    c.max_symbols = r.integer("max_symbols_per_step", 10);
    const bool tdt = contains(arch, "ForTDT") || model_type == "parakeet_tdt";
    if (tdt) c.durations = r.ints("durations").value_or(std::vector<int64_t>{0, 1, 2, 3, 4});
    const std::string joint_act = r.string("hidden_act", "relu");
    if (joint_act != "relu") return err(ErrorCode::kUnsupported, source, ": joint hidden_act '", joint_act, "' (relu is read)");
    c.joint_hidden = c.pred_hidden;  // replaced by the projection weights' size
  }
  return Status::ok();
}

}  // namespace

}  // namespace vrun::parakeet
