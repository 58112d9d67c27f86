// Constants borrowed in pieces (projections stacked into one matrix, tensors a checkpoint does
// not align to 32 bytes) and the pages of a mapped file handed back once their bytes live
// elsewhere: the same numbers on every backend and through a written program (float64
// arithmetic written here), and the file's pages out of resident memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/executor.h"
#include "runtime/graph/builder.h"
#include "runtime/base/mapped_file.h"
#include "runtime/base/zeroed_memory.h"
#include "tests/runtime/vulkan_executor.h"
#ifdef VRUN_HAVE_VULKAN
#include "kernels/vulkan/context.h"
#endif

namespace vrun::test {
namespace {

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path((std::filesystem::temp_directory_path() / (name + "." + std::to_string(getpid()))).string()) {}
  ~TempFile() { std::remove(path.c_str()); }
};

void write_file(const std::string& path, const void* bytes, size_t n) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(n));
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The process's resident memory (second field of /proc/self/statm, in pages).
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t total = 0, resident = 0;
  f >> total >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i += 97) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

TEST(MappedFile, ReleasedPagesLeaveResidentMemoryAndReadTheSame) {
  const size_t n = size_t{64} << 20;
  std::vector<uint8_t> bytes(n);
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  TempFile file("vrun_release_pages");
  write_file(file.path, bytes.data(), n);
  const uint64_t want = checksum(bytes.data(), n);
  bytes = {};
  auto mapped = MappedFile::open(file.path);
  ASSERT_TRUE(mapped.is_ok()) << mapped.status().to_string();
  const uint8_t* data = (*mapped)->data();
  ASSERT_EQ(checksum(data, n), want);  // every page touched
  const size_t before = resident_bytes();
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // From an unaligned start: only the pages wholly inside go.
  const size_t released = MappedFile::release_pages(data + 100, n - 100);
  EXPECT_EQ(released, n - page);
  const size_t after = resident_bytes();
  EXPECT_LT(after + (n - (8u << 20)), before) << "resident before " << before << ", after " << after;
  EXPECT_EQ(checksum(data, n), want) << "released pages read back from the file";
  // Not a mapping, or reaching past one: left alone.
  std::vector<uint8_t> heap(1 << 20, 7);
  EXPECT_EQ(MappedFile::release_pages(heap.data(), heap.size()), 0u);
  EXPECT_EQ(heap[12345], 7);
  EXPECT_EQ(MappedFile::release_pages(data + n - page, 2 * page), 0u);
  EXPECT_EQ(MappedFile::release_pages(nullptr, 4096), 0u);
}

TEST(ZeroedMemory, AddressesOnlyReserveNoMemory) {
  const size_t before = resident_bytes();
  ZeroedMemory m(size_t{256} << 20, /*accessible=*/false);
  ASSERT_NE(m.data(), nullptr);
  EXPECT_EQ(m.size(), size_t{256} << 20);
  EXPECT_LT(resident_bytes(), before + (size_t{16} << 20));
  m.zero();  // no write to memory that cannot be written
}

// y = x W^T + v with W [33, 40] stacked from two parts and v one unaligned piece, all borrowed
// from a mapped file at offsets that are not 32-byte aligned.
struct PiecedCase {
  static constexpr int kRows = 3, kK = 40, kTop = 24, kBottom = 9, kN = kTop + kBottom;
  TempFile file{"vrun_pieces"};
  std::vector<float> w, v, x;
  std::shared_ptr<Program> program;

  PiecedCase() {
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> d(-1, 1);
    w.resize(kN * kK);
    v.resize(kN);
    x.resize(kRows * kK);
    for (auto* vec : {&w, &v, &x})
      for (float& f : *vec) f = d(rng);
    // Layout: 4 bytes, W's top rows, 8 bytes, W's bottom rows, 12 bytes, v.
    const size_t top = kTop * kK * 4, bottom = kBottom * kK * 4;
    std::vector<uint8_t> bytes(4 + top + 8 + bottom + 12 + kN * 4, 0xee);
    std::memcpy(bytes.data() + 4, w.data(), top);
    std::memcpy(bytes.data() + 4 + top + 8, w.data() + kTop * kK, bottom);
    std::memcpy(bytes.data() + 4 + top + 8 + bottom + 12, v.data(), kN * 4);
    write_file(file.path, bytes.data(), bytes.size());
    auto mapped = MappedFile::open(file.path);
    EXPECT_TRUE(mapped.is_ok());
    if (!mapped.is_ok()) return;
    std::shared_ptr<const MappedFile> keep = *mapped;
    const uint8_t* base = keep->data();
    ProgramBuilder pb;
    const int wc = pb.add_constant_pieces("w", DType::f32, Shape{kN, kK},
                                          {{base + 4, top, keep}, {base + 4 + top + 8, bottom, keep}});
    const int vc = pb.add_constant("v", DType::f32, Shape{kN}, base + 4 + top + 8 + bottom + 12, keep);
    MethodBuilder g = pb.method("f");
    Val xi = g.input("x", DType::f32, {kRows, kK});
    g.output(g.op(OpKind::add, {g.op(OpKind::linear, {xi, g.constant(wc)}), g.constant(vc)}));
    auto p = pb.finish();
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    if (p.is_ok()) program = *p;
  }

  void expect_right(const TensorView& y, const std::string& what) const {
    ASSERT_EQ(y.shape.numel(), kRows * kN) << what;
    for (int r = 0; r < kRows; ++r)
      for (int o = 0; o < kN; ++o) {
        double want = v[o];
        for (int k = 0; k < kK; ++k) want += static_cast<double>(x[r * kK + k]) * w[o * kK + k];
        EXPECT_NEAR(y.ptr<float>()[r * kN + o], want, 1e-4) << what << " row " << r << " col " << o;
      }
  }
  std::vector<TensorView> inputs() { return {TensorView::dense(x.data(), DType::f32, {kRows, kK})}; }
};

TEST(PiecedConstants, BuilderKeepsThePiecesUncopied) {
  PiecedCase c;
  ASSERT_TRUE(c.program);
  const ConstantDef* w = nullptr;
  const ConstantDef* v = nullptr;
  for (const ConstantDef& k : c.program->constants) (k.name == "w" ? w : v) = &k;
  ASSERT_TRUE(w && v);
  EXPECT_EQ(w->data, nullptr);
  ASSERT_EQ(w->pieces.size(), 2u);
  EXPECT_EQ(v->data, nullptr);
  ASSERT_EQ(v->pieces.size(), 1u);
  std::vector<uint8_t> all(w->size);
  w->copy_to(all.data());
  EXPECT_EQ(std::memcmp(all.data(), c.w.data(), all.size()), 0);
}

// GGUF aligns tensors to 32 bytes: those are read where they lie; 16 bytes is a piece.
TEST(PiecedConstants, ThirtyTwoByteAlignedTensorsAreReadInPlace) {
  auto buf = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(std::aligned_alloc(64, 256)), [](uint8_t* p) { std::free(p); });
  ASSERT_TRUE(buf);
  ProgramBuilder pb;
  const int at32 = pb.add_constant("at32", DType::f32, Shape{8}, buf.get() + 32, buf);
  const int at16 = pb.add_constant("at16", DType::f32, Shape{8}, buf.get() + 16, buf);
  MethodBuilder g = pb.method("f");
  g.output(g.op(OpKind::add, {g.constant(at32), g.constant(at16)}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  for (const ConstantDef& c : (*p)->constants) {
    if (c.name == "at32") {
      EXPECT_EQ(c.data, buf.get() + 32);
      EXPECT_TRUE(c.pieces.empty());
    } else {
      EXPECT_EQ(c.data, nullptr);
      ASSERT_EQ(c.pieces.size(), 1u);
      EXPECT_EQ(c.pieces[0].data, buf.get() + 16);
    }
  }
}

TEST(PiecedConstants, CpuExecutorComputesWithThem) {
  PiecedCase c;
  ASSERT_TRUE(c.program);
  auto ex = Executor::create(c.program, {BackendKind::kCpu, 1});
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  auto out = (*ex)->run("f", c.inputs());
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  c.expect_right((*out)[0], "cpu");
}

TEST(PiecedConstants, WrittenProgramHoldsTheBytesInOrder) {
  PiecedCase c;
  ASSERT_TRUE(c.program);
  TempFile out_file("vrun_pieces_program.vrp");
  ASSERT_TRUE(write_program(*c.program, out_file.path).is_ok());
  auto in_memory = serialize_program(*c.program);
  ASSERT_TRUE(in_memory.is_ok());
  EXPECT_EQ(read_file(out_file.path), *in_memory) << "the streamed file and the serialised bytes differ";
  auto loaded = load_program(out_file.path);
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  for (const ConstantDef& k : (*loaded)->constants) {
    ASSERT_NE(k.data, nullptr) << k.name;
    const std::vector<float>& want = k.name == "w" ? c.w : c.v;
    ASSERT_EQ(k.size, want.size() * 4) << k.name;
    EXPECT_EQ(std::memcmp(k.data, want.data(), k.size), 0) << k.name;
  }
  auto ex = Executor::create(*loaded, {BackendKind::kCpu, 1});
  ASSERT_TRUE(ex.is_ok()) << ex.status().to_string();
  auto out = (*ex)->run("f", c.inputs());
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  c.expect_right((*out)[0], "loaded");
}

TEST(PiecedConstants, BuilderRefusesPiecesThatDoNotAddUp) {
  std::vector<float> a(10);
  ProgramBuilder pb;
  EXPECT_EQ(pb.add_constant_pieces("short", DType::f32, Shape{3, 4},
                                   {{reinterpret_cast<const uint8_t*>(a.data()), 40, nullptr}}),
            -1);
  auto p = pb.finish();
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("'short'"), std::string::npos) << p.status().message();
  EXPECT_NE(p.status().message().find("48"), std::string::npos) << p.status().message();
}

TEST(PiecedConstants, VulkanUploadsThePieces) {
  PiecedCase c;
  ASSERT_TRUE(c.program);
  std::unique_ptr<Executor> ex;
  vulkan_executor(c.program, &ex);
  if (!ex) return;
  for (const std::string& b : ex->node_backends("f")) EXPECT_EQ(b, "vulkan");
  auto out = ex->run("f", c.inputs());
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  c.expect_right((*out)[0], "vulkan");
  EXPECT_EQ(ex->gpu_validation_errors(), 0u);
}

// A fixed-shape tensor larger than one storage binding reaches (128 MiB on CPU implementations)
// runs its node on the CPU backend inside the Vulkan method, and the result is right.
TEST(VulkanPlacement, ATableBeyondOneBindingIsGatheredOnTheCpu) {
  constexpr int64_t kDim = 16, kVocab = (int64_t{129} << 20) / (kDim * 4);
  auto table = std::make_shared<ZeroedMemory>(static_cast<size_t>(kVocab * kDim * 4));
  ASSERT_NE(table->data(), nullptr);
  auto* rows = reinterpret_cast<float*>(table->data());
  const std::vector<int32_t> ids = {0, 7, static_cast<int32_t>(kVocab - 1)};
  for (int32_t id : ids)
    for (int64_t d = 0; d < kDim; ++d) rows[id * kDim + d] = static_cast<float>(id) * 0.5f + static_cast<float>(d);
  ProgramBuilder pb;
  const int tc = pb.add_constant("table", DType::f32, Shape{kVocab, kDim}, table->data(),
                                 std::shared_ptr<const void>(table, table->data()));
  MethodBuilder g = pb.method("f");
  Val id_in = g.input("ids", DType::i32, {3});
  g.output(g.op(OpKind::relu, {g.op(OpKind::embedding, {g.constant(tc), id_in})}));
  auto p = pb.finish();
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  std::unique_ptr<Executor> ex;
  vulkan_executor(*p, &ex);
  if (!ex) return;
  bool beyond = false;
#ifdef VRUN_HAVE_VULKAN
  auto ctx = vulkan::Context::create({});
  ASSERT_TRUE(ctx.is_ok());
  beyond = (*ctx)->limits().maxStorageBufferRange < static_cast<uint64_t>(kVocab * kDim * 4);
#endif
  const auto backends = ex->node_backends("f");
  ASSERT_EQ(backends.size(), 2u);
  EXPECT_EQ(backends[0], beyond ? "cpu" : "vulkan") << ex->device_description();
  EXPECT_EQ(backends[1], "vulkan");
  std::vector<int32_t> in = ids;
  auto out = ex->run("f", {TensorView::dense(in.data(), DType::i32, {3})});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  for (size_t i = 0; i < ids.size(); ++i)
    for (int64_t d = 0; d < kDim; ++d)
      EXPECT_EQ((*out)[0].ptr<float>()[i * kDim + d], static_cast<float>(ids[i]) * 0.5f + static_cast<float>(d));
  EXPECT_EQ(ex->gpu_validation_errors(), 0u);
}

}  // namespace
}  // namespace vrun::test
