#include "models/registry/families.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "models/llama/hf_llama.h"
#include "models/onnx/onnx_import.h"
#include "models/parakeet/parakeet_family.h"
#include "models/whisper/whisper_convert.h"
#include "models/whisper/whisper_import.h"
#include "runtime/base/strings.h"

namespace vrun::models {
namespace {

namespace fs = std::filesystem;

bool starts_with_magic(const std::string& path, const char* magic, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string head(n, '\0');
  return f.read(head.data(), static_cast<std::streamsize>(n)) && head == std::string(magic, n);
}

// A GGUF file, or a Hugging Face folder whose config.json names a Llama-family model_type.
bool is_llama_checkpoint(const std::string& path) {
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return starts_with_magic(path, "GGUF", 4);
  const fs::path config = fs::path(path) / "config.json";
  if (!fs::is_regular_file(config, ec)) return false;
  std::ifstream f(config);
  const auto j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const std::string type = j.value("model_type", "");
  return type == "llama" || type == "mistral" || type == "qwen2";
}

Status refuse(const BuildOptions& o, bool context, bool local_window, const std::string& family,
              std::initializer_list<DType> dtypes) {
  if (!context && o.context != 0) return err(ErrorCode::kInvalidArgument, "--ctx applies to Llama-family models, not ", family);
  if (!local_window && o.local_window >= 0) return err(ErrorCode::kInvalidArgument, "--local-window applies to Parakeet models, not ", family);
  if (!local_window && o.long_frames >= 0) return err(ErrorCode::kInvalidArgument, "--long-frames applies to Parakeet models, not ", family);
  if (family != "Whisper" && family != "Parakeet" && o.streams != 0)
    return err(ErrorCode::kInvalidArgument, "--batch-size applies to Whisper and Parakeet models, not ", family);
  if (o.streams < 0 || o.streams > 64) return err(ErrorCode::kInvalidArgument, "--batch-size must be 1 to 64, got ", o.streams);
  if (o.context < 0) return err(ErrorCode::kInvalidArgument, "--ctx must be positive (or 0 for the model's maximum), got ", o.context);
  if (o.chunk <= 0) return err(ErrorCode::kInvalidArgument, "--chunk must be positive, got ", o.chunk);
  if (o.dtype) {
    bool ok = false;
    std::string names;
    size_t k = 0;
    for (DType d : dtypes) {
      ok = ok || d == *o.dtype;
      names += (k == 0 ? "" : ++k == dtypes.size() ? " or " : ", ") + std::string(dtype_name(d));
      if (k == 0) ++k;
    }
    if (!ok) return err(ErrorCode::kInvalidArgument, "--dtype ", dtype_name(*o.dtype), " for a ", family, " model: choose ", names);
  }
  return Status::ok();
}

std::vector<Family> make_families() {
  std::vector<Family> f;
  f.push_back({"whisper", Task::kSpeechRecognition,
               "faster-whisper / CTranslate2 folder, Hugging Face Whisper folder, whisper.cpp ggml file",
               whisper::is_whisper_checkpoint,
               [](const BuildOptions& o) {
                 return refuse(o, false, false, "Whisper", {DType::f32, DType::f16, DType::bf16, DType::q8_0});
               },
               [](const std::string& path, const BuildOptions& o, std::vector<std::string>* notes) {
                 return whisper::export_whisper_program(path, o.dtype, notes, o.streams > 1 ? o.streams : 0);
               }});
  f.push_back({"parakeet", Task::kSpeechRecognition, "NeMo .nemo archive, Hugging Face ParakeetForTDT / ParakeetForCTC folder",
               parakeet::is_parakeet_checkpoint_file,
               [](const BuildOptions& o) { return refuse(o, false, true, "Parakeet", {DType::f32, DType::f16, DType::bf16}); },
               [](const std::string& path, const BuildOptions& o, std::vector<std::string>*) {
                 parakeet::BuildSettings s;
                 if (o.dtype) s.weight_dtype = *o.dtype;
                 if (o.local_window >= 0) s.local_window = o.local_window;
                 if (o.long_frames >= 0) s.max_long_frames = o.long_frames;
                 if (o.streams > 0) s.max_batch = o.streams;
                 return parakeet::import_and_build(path, s);
               }});
  f.push_back({"onnx", Task::kGraph, "ONNX model (.onnx)", onnx::is_onnx_path,
               [](const BuildOptions& o) {
                 if (o.dtype || o.context != 0 || o.local_window >= 0 || o.long_frames >= 0 || o.streams != 0)
                   return err(ErrorCode::kInvalidArgument, "--dtype, --ctx, --local-window, --long-frames and --batch-size do not apply to ONNX models");
                 return Status::ok();
               },
               [](const std::string& path, const BuildOptions&, std::vector<std::string>*) { return onnx::import_onnx(path); }});
  // Last: the widest test (any GGUF file).
  f.push_back({"llama", Task::kTextGeneration, "GGUF file (llama, mistral, qwen2), Hugging Face Llama-family folder",
               is_llama_checkpoint,
               [](const BuildOptions& o) {
                 return refuse(o, true, false, "Llama-family", {DType::f32, DType::f16, DType::bf16, DType::q8_0, DType::q4_0});
               },
               [](const std::string& path, const BuildOptions& o, std::vector<std::string>* notes) {
                 llama::ExportOptions e;
                 e.dtype = o.dtype;
                 e.context = o.context;
                 e.chunk = o.chunk;
                 return llama::build_llama_export(path, e, notes);
               }});
  return f;
}

}  // namespace

const std::vector<Family>& families() {
  static const std::vector<Family> f = make_families();
  return f;
}

const Family* find_family(const std::string& name) {
  for (const Family& f : families())
    if (f.name == name) return &f;
  return nullptr;
}

Result<Detected> detect(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return err(ErrorCode::kNotFound, path, ": no such file or folder");
  Detected d;
  if (ends_with(path, ".vrp")) {
    VRUN_ASSIGN_OR_RETURN(d.program, load_program(path));
    const MetaValue* runner = d.program->meta("vrun.runner");
    d.family = find_family(runner ? runner->s : "onnx");
    if (!d.family)
      return err(ErrorCode::kUnsupported, path, ": a program of no model family vrun runs (vrun.runner is '",
                 runner ? runner->s : "", "')");
    return d;
  }
  for (const Family& f : families())
    if (f.detect(path)) {
      d.family = &f;
      return d;
    }
  std::string known;
  for (const Family& f : families()) known += "; " + f.name + ": " + f.formats;
  return err(ErrorCode::kUnsupported, path, ": not a model vrun reads (", known.substr(2), "; or a .vrp)");
}

Result<std::shared_ptr<Program>> load_or_build(const std::string& path, const BuildOptions& options,
                                               std::vector<std::string>* notes) {
  VRUN_ASSIGN_OR_RETURN(Detected d, detect(path));
  if (d.program) return d.program;
  VRUN_RETURN_IF_ERROR(d.family->check_options(options));
  return d.family->build(path, options, notes);
}

Result<const Family*> export_program(const std::string& path, const std::string& out, const BuildOptions& options,
                                     std::vector<std::string>* notes) {
  VRUN_ASSIGN_OR_RETURN(Detected d, detect(path));
  std::shared_ptr<Program> program = d.program;
  if (!program) {
    VRUN_RETURN_IF_ERROR(d.family->check_options(options));
    VRUN_ASSIGN_OR_RETURN(program, d.family->build(path, options, notes));
  } else if (options.dtype || options.context != 0 || options.local_window >= 0 || options.long_frames >= 0 || options.streams != 0) {
    return err(ErrorCode::kInvalidArgument, path,
               " is already a program: --dtype, --ctx, --local-window, --long-frames and --batch-size apply to checkpoints");
  }
  VRUN_RETURN_IF_ERROR(write_program(*program, out).with_context("writing " + out));
  return d.family;
}

}  // namespace vrun::models
