#include "models/parakeet/parakeet_model.h"

#include "models/parakeet/parakeet_builder.h"

namespace vrun::parakeet {

std::vector<BatchShape> batch_shapes(const BuildSettings& s) {
  std::vector<BatchShape> out;
  if (s.max_batch <= 1) return out;
  BatchShape b{s.max_batch, s.max_encoder_frames};
  out.push_back(b);
  while (b.jobs * 2 <= kMaxBatchJobs && b.frames / 2 >= kMinBatchFrames) {
    b = {b.jobs * 2, b.frames / 2};
    out.push_back(b);
  }
  return out;
}

std::string batch_method_name(const BatchShape& b, int64_t max_encoder_frames) {
  return b.frames == max_encoder_frames ? std::string("encode_batch") : "encode_batch_" + std::to_string(b.frames);
}

namespace detail {

Status ParakeetBuilder::check_settings() const {
  if (M < 1 || M > 100000) return err(ErrorCode::kInvalidArgument, "parakeet build: max_encoder_frames ", M);
  if (settings.local_window < 0 || settings.local_window > 100000 ||
      (local_method && (settings.max_local_frames < 1 || settings.max_local_frames > 1000000)))
    return err(ErrorCode::kInvalidArgument, "parakeet build: local attention window ", settings.local_window, " over ",
               settings.max_local_frames, " frames");
  if (settings.max_long_frames < 0 || settings.max_long_frames > 100000)
    return err(ErrorCode::kInvalidArgument, "parakeet build: max_long_frames ", settings.max_long_frames, " (0 to 100000)");
  if (settings.max_batch < 1 || settings.max_batch > kMaxBatchJobs)
    return err(ErrorCode::kInvalidArgument, "parakeet build: max_batch ", settings.max_batch, " (1 to ", kMaxBatchJobs, ")");
  if (settings.weight_dtype && *settings.weight_dtype != DType::f32 && *settings.weight_dtype != DType::f16 &&
      *settings.weight_dtype != DType::bf16)
    return err(ErrorCode::kInvalidArgument, "parakeet build: weight dtype ", dtype_name(*settings.weight_dtype), " (f32, f16 or bf16)");
  return Status::ok();
}

// The whole greedy loop over the frames of one chunk: control (t, symbols, end, row offset,
// fresh) in, the emitted tokens out, the prediction network's state kept in decoder_state.
std::vector<Val> ParakeetBuilder::greedy_op(MethodBuilder& g, Val control, Val state, int64_t capacity) {
  return g.op_n(OpKind::tdt_greedy, {g.state(enc_state), control, state, g.constant(dec_weights), g.constant(dec_vectors)},
                {{"layers", PL}, {"pred_hidden", P}, {"joint_hidden", J}, {"vocab", V1}, {"max_symbols", c.max_symbols},
                 {"durations", c.durations}, {"capacity", capacity}},
                "tdt_greedy");
}

void ParakeetBuilder::greedy_method(MethodBuilder& g) {
  std::vector<Val> o = greedy_op(g, g.input("control", DType::i32, {5}), g.state(dec_state), kGreedyCapacity);
  if (o.size() == 2) {
    g.output(o[0], "emitted");
    g.op(OpKind::slice_update, {g.state(dec_state), o[1]}, {{"axis", 0}, {"start", 0}}, "decoder_state");
  }
}

// The greedy loops of several streams in one call (lanes): control [lanes, 5] and each lane's
// prediction-network state [lanes, n] in, emitted [lanes, kGreedyBatchCapacity + 1, 4] and the
// states after the call out. The states stay with the caller, so any stream can take any lane.
void ParakeetBuilder::greedy_batch_method(MethodBuilder& g) {
  const SymExpr B = g.symbol("lanes", 1, kMaxBatchJobs);
  Val control = g.input("control", DType::i32, {B, 5});
  Val state = g.input("state", DType::f32, {B, 2 * PL * P + J});
  std::vector<Val> o = greedy_op(g, control, state, kGreedyBatchCapacity);
  if (o.size() == 2) {
    g.output(o[0], "emitted");
    g.output(o[1], "state_out");
  }
}

void ParakeetBuilder::set_metadata() {
  pb.set_meta("general.architecture", MetaValue::str("parakeet"));
  pb.set_meta("vrun.runner", MetaValue::str("parakeet"));
  pb.set_meta("parakeet.head", MetaValue::str(tdt ? "tdt" : "ctc"));
  const std::pair<const char*, int64_t> ints[] = {
      {"parakeet.feat_in", c.feat_in},     {"parakeet.d_model", c.d_model},
      {"parakeet.n_layers", c.n_layers},   {"parakeet.n_heads", c.n_heads},
      {"parakeet.ff_dim", c.ff_dim},       {"parakeet.conv_kernel", c.conv_kernel},
      {"parakeet.subsampling_factor", c.subsampling_factor}, {"parakeet.subsampling_channels", c.subsampling_channels},
      {"parakeet.pos_emb_max_len", c.pos_emb_max_len}, {"parakeet.xscaling", c.xscaling},
      {"parakeet.use_bias", c.use_bias},   {"parakeet.vocab_size", c.vocab_size},
      {"parakeet.pred_hidden", c.pred_hidden}, {"parakeet.pred_layers", c.pred_layers},
      {"parakeet.joint_hidden", c.joint_hidden}, {"parakeet.max_symbols", c.max_symbols},
      {"parakeet.max_encoder_frames", M}, {"parakeet.max_batch", settings.max_batch}};
  for (const auto& [k, v] : ints) pb.set_meta(k, MetaValue::integer(v));
  if (c.local_window > 0) pb.set_meta("parakeet.local_window", MetaValue::integer(c.local_window));
  if (long_method) pb.set_meta("parakeet.max_long_frames", MetaValue::integer(settings.max_long_frames));
  if (local_method) {
    pb.set_meta("parakeet.encode_local_window", MetaValue::integer(settings.local_window));
    pb.set_meta("parakeet.max_local_frames", MetaValue::integer(settings.max_local_frames));
  }
  pb.set_meta("parakeet.durations", MetaValue::int_list(c.durations));
  pb.set_meta("parakeet.window_stride", MetaValue::real(c.window_stride));
  pb.set_meta("parakeet.preprocessor", MetaValue::str(model.preprocessor_json));
  pb.set_meta("parakeet.pieces", MetaValue::string_list(model.vocab.pieces));
  std::vector<int64_t> kinds;
  for (PieceKind k : model.vocab.kinds) kinds.push_back(static_cast<int64_t>(k));
  pb.set_meta("parakeet.piece_kinds", MetaValue::int_list(kinds));
  if (!model.spm_model.empty()) {
    pb.set_meta("tokenizer.kind", MetaValue::str("sentencepiece"));
    pb.set_meta("tokenizer.spm_model", MetaValue::bytes(model.spm_model));
  }
}

Result<std::shared_ptr<Program>> ParakeetBuilder::build() {
  VRUN_RETURN_IF_ERROR(check_settings());
  subsampling_weights();
  position_tables();
  for (int64_t l = 0; l < c.n_layers; ++l) L.push_back(layer_weights(l));
  if (!tdt)
    ctc_weights();
  else
    decoder_joint_weights();
  VRUN_RETURN_IF_ERROR(bad);

  {
    MethodBuilder g = pb.method("encode");
    encoder(g, 1, c.local_window, M, "");
  }
  // Padded jobs would need the key padding in band coordinates: a checkpoint with local
  // attention runs its jobs one at a time.
  std::vector<int64_t> shapes;
  std::string group;
  if (settings.max_batch > 1 && full_attention) {
    for (const BatchShape& b : batch_shapes(settings)) {
      const std::string name = batch_method_name(b, M);
      MethodBuilder g = pb.method(name);
      encoder(g, b.jobs, 0, b.frames, name + ".");
      shapes.insert(shapes.end(), {b.jobs, b.frames});
      group += (group.empty() ? "" : ",") + name;
    }
    pb.set_meta("parakeet.batch_shapes", MetaValue::int_list(shapes));
    pb.set_meta(kSharedArenasMeta, MetaValue::string_list({group}));
  }
  if (long_method) {
    MethodBuilder g = pb.method("encode_long");
    encoder(g, 1, 0, settings.max_long_frames, "long.", true);
  }
  if (local_method) {
    MethodBuilder g = pb.method("encode_local");
    encoder(g, 1, settings.local_window, settings.max_local_frames, "local.");
  }
  if (tdt) {
    MethodBuilder g = pb.method("greedy");
    greedy_method(g);
    if (settings.max_batch > 1 && full_attention) {
      MethodBuilder gb = pb.method("greedy_batch");
      greedy_batch_method(gb);
    }
  }
  set_metadata();
  return pb.finish();
}

}  // namespace detail

Result<std::shared_ptr<Program>> build_parakeet_program(const ImportedParakeet& model, const BuildSettings& settings) {
  VRUN_RETURN_IF_ERROR(model.config.validate());
  detail::ParakeetBuilder b(model, settings);
  return b.build();
}

Result<ProgramInfo> info_from_program(const Program& p) {
  ProgramInfo info;
  ParakeetConfig& c = info.config;
  const MetaValue* head = p.meta("parakeet.head");
  if (!head || (head->s != "tdt" && head->s != "ctc")) return err(ErrorCode::kInvalidProgram, p.source, ": metadata parakeet.head is missing");
  c.head = head->s == "tdt" ? HeadKind::kTdt : HeadKind::kCtc;
  int64_t xscaling = 1, use_bias = 1;
  const std::pair<const char*, int64_t*> ints[] = {
      {"parakeet.feat_in", &c.feat_in},     {"parakeet.d_model", &c.d_model},
      {"parakeet.n_layers", &c.n_layers},   {"parakeet.n_heads", &c.n_heads},
      {"parakeet.ff_dim", &c.ff_dim},       {"parakeet.conv_kernel", &c.conv_kernel},
      {"parakeet.subsampling_factor", &c.subsampling_factor}, {"parakeet.subsampling_channels", &c.subsampling_channels},
      {"parakeet.pos_emb_max_len", &c.pos_emb_max_len}, {"parakeet.xscaling", &xscaling},
      {"parakeet.use_bias", &use_bias},     {"parakeet.vocab_size", &c.vocab_size},
      {"parakeet.pred_hidden", &c.pred_hidden}, {"parakeet.pred_layers", &c.pred_layers},
      {"parakeet.joint_hidden", &c.joint_hidden}, {"parakeet.max_symbols", &c.max_symbols},
      {"parakeet.max_encoder_frames", &info.max_encoder_frames}};
  for (const auto& [k, out] : ints) {
    const MetaValue* v = p.meta(k);
    if (!v || v->type != MetaType::kInt) return err(ErrorCode::kInvalidProgram, p.source, ": metadata ", k, " is missing");
    *out = v->i;
  }
  c.xscaling = xscaling != 0;
  c.use_bias = use_bias != 0;
  // Programs from before encode_batch hold no max_batch; those from before the shorter batch
  // methods hold only encode_batch.
  const MetaValue* batch = p.meta("parakeet.max_batch");
  const int64_t max_batch = batch && batch->type == MetaType::kInt && p.method("encode_batch") ? batch->i : 1;
  if (max_batch > 1) {
    const MetaValue* shapes = p.meta("parakeet.batch_shapes");
    if (shapes && shapes->type == MetaType::kInts && shapes->ints.size() % 2 == 0) {
      for (size_t i = 0; i < shapes->ints.size(); i += 2) info.batch_shapes.push_back({shapes->ints[i], shapes->ints[i + 1]});
    } else {
      info.batch_shapes.push_back({max_batch, info.max_encoder_frames});
    }
    for (const BatchShape& b : info.batch_shapes)
      if (b.jobs < 1 || b.frames < 1 || b.frames > info.max_encoder_frames || !p.method(batch_method_name(b, info.max_encoder_frames)))
        return err(ErrorCode::kInvalidProgram, p.source, ": metadata parakeet.batch_shapes names a batch method (", b.jobs, " x ",
                   b.frames, ") the program lacks");
  }
  // Optional (programs from before local attention hold none): the checkpoint's own window, and encode_local's.
  auto optional_int = [&](const char* key) {
    const MetaValue* v = p.meta(key);
    return v && v->type == MetaType::kInt ? v->i : 0;
  };
  c.local_window = optional_int("parakeet.local_window");
  if (p.method("encode_long")) {
    info.max_long_frames = optional_int("parakeet.max_long_frames");
    if (info.max_long_frames <= info.max_encoder_frames)
      return err(ErrorCode::kInvalidProgram, p.source, ": encode_long without a frame bound above max_encoder_frames in the metadata");
  }
  if (p.method("encode_local")) {
    info.local_window = optional_int("parakeet.encode_local_window");
    info.max_local_frames = optional_int("parakeet.max_local_frames");
    if (info.local_window < 1 || info.max_local_frames < 1)
      return err(ErrorCode::kInvalidProgram, p.source, ": encode_local without its window and frame bound in the metadata");
  }
  const MetaValue* durations = p.meta("parakeet.durations");
  const MetaValue* stride = p.meta("parakeet.window_stride");
  const MetaValue* pre = p.meta("parakeet.preprocessor");
  const MetaValue* pieces = p.meta("parakeet.pieces");
  const MetaValue* kinds = p.meta("parakeet.piece_kinds");
  if (!durations || !stride || !pre || !pieces || !kinds || pieces->type != MetaType::kStrings || kinds->type != MetaType::kInts ||
      pieces->strings.size() != kinds->ints.size())
    return err(ErrorCode::kInvalidProgram, p.source, ": parakeet metadata (durations, window stride, preprocessor, vocabulary) is incomplete");
  c.durations = durations->ints;
  c.window_stride = stride->f;
  info.preprocessor_json = pre->s;
  info.vocab.pieces = pieces->strings;
  for (int64_t k : kinds->ints) {
    if (k < 0 || k > 3) return err(ErrorCode::kInvalidProgram, p.source, ": piece kind ", k);
    info.vocab.kinds.push_back(static_cast<PieceKind>(k));
  }
  VRUN_RETURN_IF_ERROR(c.validate().with_context(p.source));
  if (static_cast<int64_t>(info.vocab.size()) != c.vocab_size)
    return err(ErrorCode::kInvalidProgram, p.source, ": ", info.vocab.size(), " vocabulary pieces for a ", c.vocab_size, "-token model");
  return info;
}

}  // namespace vrun::parakeet
