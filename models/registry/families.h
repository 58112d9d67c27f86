// One way in for every model family. Each family says which checkpoints are its own (from their
// headers, not by loading them), imports and builds a program from one, and names the options that
// apply to it. Every command, the server and the bindings find a model's family here, once: a
// .vrp names its family in its metadata ("vrun.runner"), so it is loaded once and handed on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/base/dtype.h"
#include "runtime/base/status.h"
#include "runtime/program.h"

namespace vrun::models {

// kGraph: a plain graph with named inputs and outputs (ONNX models; `vrun run`).
enum class Task { kTextGeneration, kSpeechRecognition, kGraph };

// What `vrun export` and the loaders may ask of a build; each family takes what applies to it and
// refuses the rest by name (check_options).
struct BuildOptions {
  std::optional<DType> dtype;    // type of the large matrices; unset: as in the checkpoint
  int64_t context = 0;           // text generation: KV-cache rows (0: the model's maximum)
  int64_t chunk = 512;           // text generation: most tokens per prefill call
  int64_t local_window = -1;     // Parakeet: frames either side of local attention (-1: default)
  int64_t long_frames = -1;      // Parakeet: encode_long's frames, full attention in one call (-1: default)
  // Whisper: files `transcribe --batch-size` decodes together (0: none). Parakeet: jobs of full
  // length (160 s) a batched encoder call takes (0: the default, 4).
  int64_t streams = 0;
};

struct Family {
  std::string name;     // "llama", "whisper", "parakeet": also the program's vrun.runner; "onnx"
  Task task;
  std::string formats;  // what checkpoints it reads, for messages and `vrun info`
  // Whether a checkpoint (not a .vrp) is this family's, from its headers and config files.
  std::function<bool(const std::string& path)> detect;
  // Options that do not apply, or values outside what the family takes: an error naming them.
  std::function<Status(const BuildOptions&)> check_options;
  // Imports a checkpoint and builds its program. notes: conversion notes for the user.
  std::function<Result<std::shared_ptr<Program>>(const std::string& path, const BuildOptions&, std::vector<std::string>* notes)>
      build;
};

const std::vector<Family>& families();
const Family* find_family(const std::string& name);

struct Detected {
  const Family* family = nullptr;
  std::shared_ptr<Program> program;  // set for a .vrp: loaded once, to be handed on
};
// The family of a checkpoint or program, or an error naming the path and what vrun reads. A .vrp
// without vrun.runner is a plain graph (the onnx family).
Result<Detected> detect(const std::string& path);

// A program for `path`: the .vrp itself, or the checkpoint imported and built.
Result<std::shared_ptr<Program>> load_or_build(const std::string& path, const BuildOptions& options,
                                               std::vector<std::string>* notes);

// `vrun export` and the bindings' export(): the program of the checkpoint at `path`, built with
// `options` (checked against its family first), written to `out`. A .vrp is written again as it is,
// and refuses dtype, context and local_window (they apply to checkpoints). Returns the family.
Result<const Family*> export_program(const std::string& path, const std::string& out, const BuildOptions& options,
                                     std::vector<std::string>* notes);

}  // namespace vrun::models
