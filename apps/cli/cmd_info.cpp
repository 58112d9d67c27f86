// vrun info: what a program holds and which backend runs each op.
#include <cstdio>
#include <map>

#include "apps/cli/command.h"
#include "models/registry/families.h"
#include "runtime/backend.h"
#include "runtime/base/knobs.h"
#include "runtime/executor.h"
#include "runtime/program.h"

namespace vrun::cli {
namespace {


std::string dims_str(const MethodDef& m, const ValueDef& v) {
  std::string s = "[";
  const auto names = m.symbol_names();
  for (size_t d = 0; d < v.dims.size(); ++d) {
    const DimDef& dd = v.dims[d];
    if (d) s += ", ";
    if (dd.expr) s += dd.expr->str(names);
    else if (dd.derived) s += "<=" + std::to_string(dd.size);
    else s += std::to_string(dd.size);
  }
  return s + "]";
}

std::string meta_str(const MetaValue& v) {
  switch (v.type) {
    case MetaType::kString: return v.s.size() > 80 ? "\"" + v.s.substr(0, 77) + "...\"" : "\"" + v.s + "\"";
    case MetaType::kInt: return std::to_string(v.i);
    case MetaType::kFloat: return std::to_string(v.f);
    case MetaType::kBytes: return "<" + human_bytes(v.s.size()) + " of bytes>";
    case MetaType::kInts: {
      std::string s = "[";
      for (size_t i = 0; i < v.ints.size() && i < 8; ++i) s += (i ? ", " : "") + std::to_string(v.ints[i]);
      return s + (v.ints.size() > 8 ? ", ... (" + std::to_string(v.ints.size()) + ")]" : "]");
    }
    case MetaType::kStrings: return "<" + std::to_string(v.strings.size()) + " strings>";
    case MetaType::kFloats: return "<" + std::to_string(v.floats.size()) + " numbers>";
  }
  return "?";
}

// What each backend finds on this machine: devices, the CPU's BLAS kernels.
void print_backends() {
  for (const BackendEntry& b : registered_backends())
    for (const std::string& line : b.describe ? b.describe() : std::vector<std::string>{}) std::printf("%s\n", line.c_str());
  if (!find_backend("vulkan")) std::printf("vulkan: not built (-DVRUN_VULKAN=OFF)\n");
}

// Every run-time switch (runtime/base/knobs.def) and its value in this environment.
void print_knobs() {
  std::string group;
  for (size_t i = 0; i < all_knobs().size(); ++i) {
    const KnobInfo& k = all_knobs()[i];
    if (group != k.group) std::printf("%s:\n", (group = k.group).c_str());
    const char* v = knob_value(static_cast<Knob>(i));
    std::printf("  %-22s %-10s %s\n", k.name, v ? v : "(unset)", k.doc);
  }
}

int run_info(const std::string& path, bool nodes, const std::string& backend, int device, bool knobs) {
  if (knobs) {
    print_knobs();
    return 0;
  }
  print_backends();
  if (path.empty()) return 0;
  // Any model vrun reads: a .vrp, or a checkpoint imported and built as the commands would.
  std::vector<std::string> notes;
  auto prog = models::load_or_build(path, {}, &notes);
  for (const auto& n : notes) std::fprintf(stderr, "vrun: %s\n", n.c_str());
  if (!prog.is_ok()) return fail("info", prog.status().to_string());
  const Program& p = **prog;
  auto kind = parse_backend_kind(backend);
  if (!kind.is_ok()) return fail("info", kind.status().message());
  ExecutorOptions opts;
  opts.backend = *kind;
  opts.threads = 1;
  opts.device = device;
  auto ex = Executor::create(*prog, opts);
  if (!ex.is_ok()) return fail("info", ex.status().to_string());

  uint64_t state_bytes = 0;
  for (const auto& s : p.states) state_bytes += dtype_bytes(s.dtype, s.shape.numel());
  std::printf("program %s: format v%u, %zu constants (%s), %zu states (%s), %zu methods\n", path.c_str(), p.version,
              p.constants.size(), human_bytes(p.constant_bytes()).c_str(), p.states.size(), human_bytes(state_bytes).c_str(),
              p.methods.size());
  if (!p.metadata.empty()) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : p.metadata) std::printf("  %s = %s\n", k.c_str(), meta_str(v).c_str());
  }
  std::printf("backend: %s\n", (*ex)->device_description().c_str());
  for (const auto& s : p.states) std::printf("state %s: %s %s\n", s.name.c_str(), dtype_name(s.dtype), s.shape.str().c_str());
  for (const MethodDef& m : p.methods) {
    std::printf("method %s: %zu nodes, scratch arena %s\n", m.name.c_str(), m.nodes.size(), human_bytes(m.arena_size).c_str());
    for (const auto& s : m.symbols)
      std::printf("  symbol %s in [%lld, %lld]\n", s.name.c_str(), static_cast<long long>(s.min), static_cast<long long>(s.max));
    for (int id : m.inputs)
      std::printf("  input  %s: %s %s\n", m.values[id].name.c_str(), dtype_name(m.values[id].dtype), dims_str(m, m.values[id]).c_str());
    for (int id : m.outputs)
      std::printf("  output %s: %s %s\n", m.values[id].name.c_str(), dtype_name(m.values[id].dtype), dims_str(m, m.values[id]).c_str());
    const auto backends = (*ex)->node_backends(m.name);
    std::map<std::string, std::map<std::string, int>> counts;  // op -> backend -> count
    for (size_t n = 0; n < m.nodes.size(); ++n) {
      const bool view = op_schema(m.nodes[n].op).is_view();
      counts[op_name(m.nodes[n].op)][view ? "view" : backends[n]]++;
    }
    std::printf("  ops:");
    for (const auto& [op, by] : counts)
      for (const auto& [b, c] : by) std::printf(" %s x%d (%s)", op.c_str(), c, b.c_str());
    std::printf("\n");
    if (nodes) {
      for (size_t n = 0; n < m.nodes.size(); ++n) {
        const NodeDef& node = m.nodes[n];
        std::printf("  [%zu] %s %s ->", n, op_name(node.op), node.name.c_str());
        for (int id : node.outputs)
          std::printf(" %s%s", dtype_name(m.values[id].dtype), dims_str(m, m.values[id]).c_str());
        std::printf("  on %s\n", op_schema(node.op).is_view() ? "view" : backends[n].c_str());
      }
    }
  }
  return 0;
}

CommandRegistrar reg("info", "Show what a program (.vrp) holds: methods, symbols, inputs/outputs, constants, "
                             "metadata, and which backend runs each op",
                     [](CLI::App& sub) {
                       auto path = std::make_shared<std::string>();
                       auto nodes = std::make_shared<bool>(false);
                       auto backend = std::make_shared<std::string>("auto");
                       auto device = std::make_shared<int>(-1);
                       auto knobs = std::make_shared<bool>(false);
                       sub.add_option("-m,--model", *path, "Model: a .vrp, an .onnx file or any checkpoint the other commands read; without it only the devices are listed");
                       sub.add_option("--device", *device, "Vulkan device index (see the list; VRUN_DEVICE also works)");
                       sub.add_flag("--nodes", *nodes, "List every node with its output shapes and backend");
                       sub.add_flag("--knobs", *knobs, "List the VRUN_* environment switches, what each does and its value here");
                       sub.add_option("--backend", *backend, "Backend to plan for: cpu, vulkan or auto")
                           ->capture_default_str();
                       return [=] { return run_info(*path, *nodes, *backend, *device, *knobs); };
                     });

}  // namespace
}  // namespace vrun::cli
