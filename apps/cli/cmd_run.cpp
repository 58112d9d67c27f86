// vrun run: any graph (an ONNX file or a program) on .npy inputs, each output written as .npy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "apps/cli/command.h"
#include "models/onnx/npy_array.h"
#include "models/onnx/onnx_import.h"
#include "runtime/executor.h"

namespace vrun::cli {
namespace {

struct RunArgs {
  std::string model, out_dir = ".", backend = "auto", method = "forward";
  std::vector<std::string> inputs, dims;
  int device = -1;
  int repeat = 0;
};

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// --repeat N: the call N more times on the same inputs after the first; the first call's time
// (pipelines built or read from the cache, constants uploaded) and the median and best of the
// others go to stderr. Each time is a whole call: inputs in, outputs back in host memory.
void report_times(double load_ms, double first_ms, std::vector<double> warm) {
  std::fprintf(stderr, "time: load %.2f ms, first call %.3f ms", load_ms, first_ms);
  if (!warm.empty()) {
    std::sort(warm.begin(), warm.end());
    std::fprintf(stderr, ", then %zu calls: median %.3f ms, best %.3f ms, p90 %.3f ms", warm.size(),
                 warm[warm.size() / 2], warm.front(), warm[std::min(warm.size() - 1, warm.size() * 9 / 10)]);
  }
  std::fprintf(stderr, "\n");
}

// Output names as file names: anything but [A-Za-z0-9._-] becomes '_'.
std::string file_name(const std::string& name) {
  std::string s = name.empty() ? "output" : name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (s[0] == '.') s[0] = '_';
  return s;
}

int run_graph(const RunArgs& a) {
  if (a.repeat < 0 || a.repeat > 100000)
    return fail("run", "--repeat must be in 0..100000, got " + std::to_string(a.repeat));
  onnx::ImportOptions io;
  for (const auto& d : a.dims) {
    const Status s = onnx::parse_dim_option(d, &io);
    if (!s.is_ok()) return fail("run", s.message());
  }
  const auto t_load = Clock::now();  // import or load, then the backend's setup
  auto prog = onnx::load_program_or_onnx(a.model, io);
  if (!prog.is_ok()) return fail("run", prog.status().to_string());
  const MethodDef* m = (*prog)->method(a.method);
  if (!m) return fail("run", a.model + " has no method '" + a.method + "'");
  std::map<std::string, onnx::NpyTensor> given;
  for (const auto& spec : a.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail("run", "--input '" + spec + "': expected NAME=FILE.npy");
    auto t = onnx::read_npy_tensor(spec.substr(eq + 1));
    if (!t.is_ok()) return fail("run", t.status().to_string());
    given[spec.substr(0, eq)] = std::move(*t);
  }
  std::vector<TensorView> inputs;
  std::string names;
  for (int id : m->inputs) {
    const ValueDef& v = m->values[static_cast<size_t>(id)];
    names += (names.empty() ? "" : ", ") + v.name;
    auto it = given.find(v.name);
    if (it == given.end()) continue;
    if (it->second.dtype != v.dtype)
      return fail("run", "--input " + v.name + ": the model takes " + dtype_name(v.dtype) +
                             ", the file holds " + dtype_name(it->second.dtype));
    inputs.push_back(it->second.view());
  }
  if (inputs.size() != m->inputs.size() || given.size() != m->inputs.size())
    return fail("run", "give each of the inputs " + names + " exactly once with --input NAME=FILE.npy");
  auto kind = parse_backend_kind(a.backend);
  if (!kind.is_ok()) return fail("run", kind.status().message());
  ExecutorOptions eo;
  eo.backend = *kind;
  eo.device = a.device;
  auto ex = Executor::create(*prog, eo);
  if (!ex.is_ok()) return fail("run", ex.status().to_string());
  const double load_ms = ms_since(t_load);
  const auto t_first = Clock::now();
  auto outs = (*ex)->run(a.method, inputs);
  if (!outs.is_ok()) return fail("run", outs.status().to_string());
  const double first_ms = ms_since(t_first);
  std::vector<double> warm;
  for (int r = 0; r < a.repeat; ++r) {
    const auto t = Clock::now();
    outs = (*ex)->run(a.method, inputs);
    if (!outs.is_ok()) return fail("run", outs.status().to_string());
    warm.push_back(ms_since(t));
  }
  std::error_code ec;
  std::filesystem::create_directories(a.out_dir, ec);
  for (size_t k = 0; k < outs->size(); ++k) {
    const std::string& name = m->values[static_cast<size_t>(m->outputs[k])].name;
    const std::string path = (std::filesystem::path(a.out_dir) / (file_name(name) + ".npy")).string();
    const Status s = onnx::write_npy_tensor(path, (*outs)[k]);
    if (!s.is_ok()) return fail("run", s.to_string());
    std::printf("%s: %s %s -> %s\n", name.c_str(), dtype_name((*outs)[k].dtype),
                (*outs)[k].shape.str().c_str(), path.c_str());
  }
  std::fprintf(stderr, "backend: %s\n", (*ex)->device_description().c_str());
  if (a.repeat > 0) report_times(load_ms, first_ms, std::move(warm));
  return 0;
}

CommandRegistrar reg(
    "run", "Run a graph (an ONNX file or a program) on .npy inputs and write each output as .npy",
    [](CLI::App& sub) {
      auto a = std::make_shared<RunArgs>();
      sub.add_option("-m,--model", a->model, "Model: .onnx or a program file (.vrp)")->required();
      sub.add_option("--input", a->inputs, "NAME=FILE.npy, once per graph input");
      sub.add_option("-o,--output-dir", a->out_dir, "Folder for the outputs (NAME.npy each)")
          ->capture_default_str();
      sub.add_option("--dim", a->dims,
                     "ONNX symbolic dim: NAME=SIZE fixes it, NAME=MIN:MAX bounds it (default 1:64)");
      sub.add_option("--backend", a->backend, "cpu, vulkan or auto")->capture_default_str();
      sub.add_option("--device", a->device, "Vulkan device index");
      sub.add_option("--method", a->method, "Method of a program to run")->capture_default_str();
      sub.add_option("--repeat", a->repeat,
                     "Run the call N more times and print the first call's time and the others' median, best and p90");
      return [a] { return run_graph(*a); };
    });

}  // namespace
}  // namespace vrun::cli
