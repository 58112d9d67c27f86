"""NeMo .nemo -> Hugging Face ParakeetForTDT / ParakeetForCTC folder, following the rules of
transformers' src/transformers/models/parakeet/convert_nemo_to_hf.py (that script is not in the
wheels and only converts checkpoints it downloads from the hub; its rules are restated here).

Where that script assumes the released checkpoints' shapes, this one takes them from the
checkpoint's config instead (the released shapes make both give the same folder):
  - intermediate_size = d_model * ff_expansion_factor (the script drops ff_expansion_factor and
    keeps ParakeetEncoderConfig's default 4096 = 1024 * 4);
  - CTC: vocab_size = len(labels) + 1 and pad_token_id (the CTC blank) = len(labels) (the script
    keeps ParakeetCTCConfig's defaults 1025 / 1024).
"""
import os
import re
import tarfile
import tempfile

import torch
import yaml

NEMO_TO_HF = [
    (r"encoder\.pre_encode\.conv\.", r"encoder.subsampling.layers."),
    (r"encoder\.pre_encode\.out\.", r"encoder.subsampling.linear."),
    (r"encoder\.pos_enc\.", r"encoder.encode_positions."),
    (r"encoder\.layers\.(\d+)\.conv\.batch_norm\.", r"encoder.layers.\1.conv.norm."),
    (r"decoder\.decoder_layers\.0\.(weight|bias)", r"ctc_head.\1"),
    (r"linear_([kv])", r"\1_proj"),
    (r"linear_out", r"o_proj"),
    (r"linear_q", r"q_proj"),
    (r"pos_bias_([uv])", r"bias_\1"),
    (r"linear_pos", r"relative_k_proj"),
]
NEMO_TO_HF_TDT = [
    (r"decoder\.prediction\.embed\.", r"decoder.embedding."),
    (r"decoder\.prediction\.dec_rnn\.lstm\.", r"decoder.lstm."),
    (r"joint\.enc\.", r"encoder_projector."),
    (r"joint\.pred\.", r"decoder.decoder_projector."),
    (r"joint\.joint_net\.2\.", r"joint.head."),
]

ENCODER_IGNORED = {"att_context_size", "causal_downsampling", "stochastic_depth_start_layer", "feat_out", "_target_",
                   "ff_expansion_factor", "untie_biases", "att_context_style", "self_attention_model",
                   "conv_norm_type", "subsampling", "stochastic_depth_mode", "conv_context_size",
                   "dropout_pre_encoder", "reduction", "reduction_factor", "reduction_position"}
ENCODER_KEYS = {"d_model": "hidden_size", "n_heads": "num_attention_heads", "n_layers": "num_hidden_layers",
                "feat_in": "num_mel_bins", "conv_kernel_size": "conv_kernel_size",
                "subsampling_factor": "subsampling_factor", "subsampling_conv_channels": "subsampling_conv_channels",
                "pos_emb_max_len": "max_position_embeddings", "dropout": "dropout", "dropout_emb": "dropout_positions",
                "dropout_att": "attention_dropout", "xscaling": "scale_input", "use_bias": "attention_bias",
                "stochastic_depth_drop_prob": "layerdrop"}
FEATURE_IGNORED = {"_target_", "pad_to", "frame_splicing", "dither", "normalize", "window", "log"}
FEATURE_KEYS = {"sample_rate": "sampling_rate", "window_size": "win_length", "window_stride": "hop_length",
                "n_fft": "n_fft", "features": "feature_size", "pad_value": "padding_value",
                "preemphasis": "preemphasis", "hop_length": "hop_length"}


def convert_key(key, mapping):
    for pattern, repl in mapping:
        key = re.sub(pattern, repl, key)
    return key


def extract(nemo_path, out_dir):
    with tarfile.open(nemo_path, "r") as tar:
        tar.extractall(out_dir, filter="data")
    files = {}
    for root, _, names in os.walk(out_dir):
        for n in names:
            p = os.path.join(root, n)
            if n == "model_config.yaml":
                files["config"] = p
            elif n.endswith(".ckpt"):
                files["weights"] = p
            elif n.endswith(".model"):
                files["tokenizer"] = p
    missing = {"config", "weights", "tokenizer"} - files.keys()
    assert not missing, f"{nemo_path}: no {missing} in the archive"
    return files


def encoder_config(cfg):
    from transformers import ParakeetEncoderConfig
    out = {"layerdrop": 0.0}
    for k, v in cfg["encoder"].items():
        if k in ENCODER_IGNORED:
            continue
        assert k in ENCODER_KEYS, f"encoder key {k} has no Hugging Face counterpart"
        out[ENCODER_KEYS[k]] = v
        if k == "use_bias":
            out["convolution_bias"] = v
    out["intermediate_size"] = cfg["encoder"]["d_model"] * cfg["encoder"]["ff_expansion_factor"]
    return ParakeetEncoderConfig(**out)


def write_processor(cfg, tokenizer_model, out_dir, kind):
    from tokenizers import AddedToken
    from transformers import ParakeetFeatureExtractor, ParakeetProcessor, ParakeetTokenizer
    from transformers.convert_slow_tokenizer import ParakeetConverter
    tok = ParakeetTokenizer(tokenizer_object=ParakeetConverter(tokenizer_model).converted(),
                            clean_up_tokenization_spaces=False)
    if tok.convert_tokens_to_ids("<unk>") is None:
        tok.add_tokens([AddedToken("<unk>", normalized=False, special=True)])
    if tok.convert_tokens_to_ids("<pad>") is None:
        tok.add_tokens([AddedToken("<pad>", normalized=False, special=True)])
    if kind == "tdt":
        tok.add_tokens([AddedToken("<blank>", normalized=False, special=True)])
    tok.add_special_tokens({"pad_token": AddedToken("<pad>", normalized=False, special=True),
                            "unk_token": AddedToken("<unk>", normalized=False, special=True)})
    pre = cfg["preprocessor"]
    fe = {}
    for k, v in pre.items():
        if k in FEATURE_IGNORED:
            continue
        assert k in FEATURE_KEYS, f"preprocessor key {k} has no Hugging Face counterpart"
        if k in ("window_size", "window_stride"):
            v = int(v * pre["sample_rate"])
        fe[FEATURE_KEYS[k]] = v
    ParakeetProcessor(feature_extractor=ParakeetFeatureExtractor(**fe), tokenizer=tok,
                      decoder_type=kind).save_pretrained(out_dir)


def load_state_dict(weights, mapping):
    sd = torch.load(weights, map_location="cpu", weights_only=True)
    return {convert_key(k, mapping): v for k, v in sd.items()
            if not (k.endswith("featurizer.window") or k.endswith("featurizer.fb"))}


def convert(nemo_path, out_dir, kind):
    from transformers import ParakeetCTCConfig, ParakeetForCTC, ParakeetForTDT, ParakeetTDTConfig
    with tempfile.TemporaryDirectory() as tmp:
        files = extract(nemo_path, tmp)
        with open(files["config"], encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
        enc = encoder_config(cfg)
        os.makedirs(out_dir, exist_ok=True)
        write_processor(cfg, files["tokenizer"], out_dir, kind)
        if kind == "tdt":
            labels = cfg["labels"]
            pred = cfg["decoder"]["prednet"]
            config = ParakeetTDTConfig(
                vocab_size=len(labels) + 1, decoder_hidden_size=pred["pred_hidden"],
                num_decoder_layers=pred["pred_rnn_layers"], durations=cfg["decoding"]["durations"],
                hidden_act="relu", max_symbols_per_step=10, encoder_config=enc.to_dict(),
                pad_token_id=labels.index("<pad>"), blank_token_id=len(labels))
            model_cls, mapping = ParakeetForTDT, NEMO_TO_HF + NEMO_TO_HF_TDT
        else:
            labels = cfg["decoder"]["vocabulary"]
            config = ParakeetCTCConfig(vocab_size=len(labels) + 1, pad_token_id=len(labels), encoder_config=enc)
            model_cls, mapping = ParakeetForCTC, NEMO_TO_HF
        sd = load_state_dict(files["weights"], mapping)
    with torch.device("meta"):
        model = model_cls(config)
    missing, unexpected = model.load_state_dict(sd, strict=False, assign=True)
    assert not missing and not unexpected, f"{nemo_path}: missing {missing}, unexpected {unexpected}"
    del model.config._name_or_path
    if kind == "tdt":
        model.generation_config.decoder_start_token_id = config.blank_token_id
        model.generation_config.suppress_tokens = list(range(config.vocab_size,
                                                             config.vocab_size + len(config.durations)))
    model.save_pretrained(out_dir)
    print(f"{out_dir}: {sorted(os.listdir(out_dir))}")
