// vrun run: any graph (an ONNX file or a program) on .npy inputs, each output written as .npy.
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
};

// Output names as file names: anything but [A-Za-z0-9._-] becomes '_'.
std::string file_name(const std::string& name) {
  std::string s = name.empty() ? "output" : name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  if (s[0] == '.') s[0] = '_';
  return s;
}

int run_graph(const RunArgs& a) {
  onnx::ImportOptions io;
  for (const auto& d : a.dims) {
    const Status s = onnx::parse_dim_option(d, &io);
    if (!s.is_ok()) return fail("run", s.message());
  }
  auto prog = onnx::load_program_or_onnx(a.model, io);
  if (!prog.is_ok()) return fail("run", prog.status().to_string());
  const MethodDef* m = (*prog)->method(a.method);
  if (!m) return fail("run", a.model + " has no method '" + a.method + "'");
  std::map<std::string, onnx::NpyTensor> given;
  for (const auto& spec : a.inputs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0) return fail("run", "--input '" + spec + "': expected NAME=FILE.npy");
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
      return fail("run", "--input " + v.name + ": the model takes " + dtype_name(v.dtype) + ", the file holds " +
                             dtype_name(it->second.dtype));
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
  auto outs = (*ex)->run(a.method, inputs);
  if (!outs.is_ok()) return fail("run", outs.status().to_string());
  std::error_code ec;
  std::filesystem::create_directories(a.out_dir, ec);
  for (size_t k = 0; k < outs->size(); ++k) {
    const std::string& name = m->values[static_cast<size_t>(m->outputs[k])].name;
    const std::string path = (std::filesystem::path(a.out_dir) / (file_name(name) + ".npy")).string();
    const Status s = onnx::write_npy_tensor(path, (*outs)[k]);
    if (!s.is_ok()) return fail("run", s.to_string());
    std::printf("%s: %s %s -> %s\n", name.c_str(), dtype_name((*outs)[k].dtype), (*outs)[k].shape.str().c_str(),
                path.c_str());
  }
  std::fprintf(stderr, "backend: %s\n", (*ex)->device_description().c_str());
  return 0;
}

CommandRegistrar reg("run", "Run a graph (an ONNX file or a program) on .npy inputs and write each output as .npy",
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
                       return [a] { return run_graph(*a); };
                     });

}  // namespace
}  // namespace vrun::cli
