// Device selection, memory (sub-allocation, clear out-of-memory errors), pipeline caching,
// barrier placement, transfers, and the CPU fallback inside a method.
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "kernels/vulkan/pipelines.h"

#include "tests/vulkan/vk_test_util.h"

namespace vrun::test {
namespace {

class VkDevice : public VulkanTest {};

TEST_F(VkDevice, ListsDevicesWithFeatures) {
  const auto devices = vulkan::Context::list_devices();
  ASSERT_FALSE(devices.empty());
  bool found = false;
  for (const auto& d : devices) {
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.subgroup_size, 0u) << d.name;
    if (d.name == ctx().info().name) found = true;
  }
  EXPECT_TRUE(found) << "the chosen device " << ctx().info().name << " is not listed";
  EXPECT_TRUE(ctx().kernels_usable()) << "16/8-bit storage missing on " << ctx().info().name;
}

TEST_F(VkDevice, BadDeviceIndexIsAnError) {
  vulkan::ContextOptions o;
  o.device_index = 1000;
  auto r = vulkan::Context::create(o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("1000"), std::string::npos) << r.status().message();
}

TEST_F(VkDevice, OutOfMemoryNamesAskedAndFree) {
  const uint64_t huge = 1ull << 50;
  auto r = ctx().allocator().allocate(huge, vulkan::MemoryKind::kDevice, "weights of a test");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kOutOfMemory);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find(std::to_string(huge)), std::string::npos) << m;
  EXPECT_NE(m.find("free"), std::string::npos) << m;
  EXPECT_NE(m.find("weights of a test"), std::string::npos) << m;
  // The allocator still works afterwards.
  auto ok = ctx().allocator().allocate(1024);
  EXPECT_TRUE(ok.is_ok());
}

// The driver refusing a new block (memory full) is an error naming the request, not a hang: the
// report reads the allocator's figures while allocate() holds its lock.
TEST_F(VkDevice, RefusedBlockIsAnOutOfMemoryError) {
  auto& alloc = ctx().allocator();
  const uint64_t chunk = 1ull << 20, reserved = alloc.stats().reserved;
  alloc.refuse_new_blocks_for_testing(true);
  std::vector<vulkan::Buffer> held;
  Status failure = Status::ok();
  // The blocks there are fill up within reserved / chunk allocations; the next needs a new one.
  for (uint64_t i = 0; i <= reserved / chunk + 1 && failure.is_ok(); ++i) {
    auto b = alloc.allocate(chunk, vulkan::MemoryKind::kDevice, "a refused test tensor");
    if (b.is_ok()) held.push_back(std::move(b).value());
    else failure = b.status();
  }
  alloc.refuse_new_blocks_for_testing(false);
  ASSERT_FALSE(failure.is_ok()) << "no allocation needed a new block";
  EXPECT_EQ(failure.code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(failure.message().find("a refused test tensor"), std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find(std::to_string(chunk)), std::string::npos) << failure.message();
  EXPECT_TRUE(alloc.allocate(chunk).is_ok());
}

TEST_F(VkDevice, SubAllocatorReusesFreedRanges) {
  const uint64_t before = ctx().allocator().stats().allocated;
  std::vector<vulkan::Buffer> bufs;
  for (int i = 0; i < 50; ++i) {
    auto b = ctx().allocator().allocate(1000 + 37 * i);
    ASSERT_TRUE(b.is_ok());
    EXPECT_EQ(b->ref().offset % ctx().allocator().alignment(), 0u);
    bufs.push_back(std::move(b).value());
  }
  const uint64_t reserved = ctx().allocator().stats().reserved;
  for (size_t i = 0; i < bufs.size(); i += 2) bufs[i] = vulkan::Buffer();
  bufs.clear();
  EXPECT_EQ(ctx().allocator().stats().allocated, before);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(ctx().allocator().allocate(2000).is_ok());
  EXPECT_EQ(ctx().allocator().stats().reserved, reserved) << "freed ranges were not reused";
}

TEST_F(VkDevice, RecordedTransfersRoundTrip) {
  std::vector<uint8_t> src(100003), dst(100003);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 31 + 7);
  auto buf = ctx().allocator().allocate(src.size() + 16);
  ASSERT_TRUE(buf.is_ok());
  auto rec = vulkan::Recorder::create(ctx());
  ASSERT_TRUE(rec.is_ok());
  ASSERT_TRUE((*rec)->record_upload(src.data(), buf->ref(), 16, src.size()).is_ok());
  ASSERT_TRUE((*rec)->record_download(buf->ref(), 16, dst.data(), dst.size()).is_ok());
  ASSERT_TRUE((*rec)->submit_and_wait().is_ok());
  EXPECT_EQ(src, dst);
}

// A state's first device copy after reset_state is made by zeroing on the device (the executor
// knows the host copy is zeros): the zeroing covers its range only and is ordered after the upload
// recorded before it.
TEST_F(VkDevice, RecordedZeroingCoversItsRangeOnly) {
  std::vector<uint8_t> src(4096, 0xab), dst(4096);
  auto buf = ctx().allocator().allocate(src.size());
  ASSERT_TRUE(buf.is_ok());
  auto rec = std::move(vulkan::Recorder::create(ctx())).value();
  ASSERT_TRUE(rec->record_upload(src.data(), buf->ref(), 0, src.size()).is_ok());
  ASSERT_TRUE(rec->record_zero(buf->ref(), 1024, 2048).is_ok());
  EXPECT_EQ(rec->barrier_count(), 1) << "the zeroing overwrites what the upload wrote";
  EXPECT_FALSE(rec->record_zero(buf->ref(), 0, 6).is_ok()) << "not a whole number of words";
  ASSERT_TRUE(rec->record_download(buf->ref(), 0, dst.data(), dst.size()).is_ok());
  ASSERT_TRUE(rec->submit_and_wait().is_ok());
  for (size_t i = 0; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], i >= 1024 && i < 3072 ? 0 : 0xab) << "byte " << i;
}

TEST_F(VkDevice, BarriersOnlyBetweenDependentDispatchesAndPipelinesCached) {
  std::mt19937 rng(60);
  HostTensor x = random_tensor(DType::f32, Shape{1000}, rng);
  auto dx = to_device(x);
  auto b1 = ctx().allocator().allocate(4000), b2 = ctx().allocator().allocate(4000), b3 = ctx().allocator().allocate(4000);
  const auto y1 = vulkan::DeviceView::dense(b1->ref(), DType::f32, Shape{1000});
  const auto y2 = vulkan::DeviceView::dense(b2->ref(), DType::f32, Shape{1000});
  const auto y3 = vulkan::DeviceView::dense(b3->ref(), DType::f32, Shape{1000});
  auto rec = std::move(vulkan::Recorder::create(ctx())).value();
  Attrs s(OpKind::scale);
  s.set_f("scale", 2.0);
  ASSERT_TRUE(rec->record(OpKind::scale, {dx.view}, {y1}, s).is_ok());
  ASSERT_TRUE(rec->record(OpKind::exp, {dx.view}, {y2}, Attrs(OpKind::exp)).is_ok());
  EXPECT_EQ(rec->barrier_count(), 0) << "two dispatches reading x and writing distinct outputs need no barrier";
  ASSERT_TRUE(rec->record(OpKind::add, {y1, y2}, {y3}, Attrs(OpKind::add)).is_ok());
  EXPECT_EQ(rec->barrier_count(), 1);
  const size_t pipelines = ctx().pipelines().size();
  ASSERT_TRUE(rec->record(OpKind::scale, {y3}, {y1}, s).is_ok());  // reads y3 (RAW) and overwrites y1 (WAR)
  EXPECT_EQ(rec->barrier_count(), 2);
  EXPECT_EQ(ctx().pipelines().size(), pipelines) << "a second scale must reuse its pipeline";
  ASSERT_TRUE(rec->submit_and_wait().is_ok());
  HostTensor got = to_host(y1);
  std::vector<double> want;
  for (double v : to_doubles(x.view)) want.push_back(2 * (2 * v + std::exp(v)));
  expect_close(to_doubles(got.view), want, 1e-6, 1e-6, "scale(add(scale, exp))");
}

// An op's scratch (here the dense copy that rms_norm makes of a transposed input) goes back to the
// call once the op is recorded: the next op of the call takes the same memory instead of new
// memory, and the hazard tracking puts a barrier before its copy overwrites what the first norm
// reads, so both results are right.
TEST_F(VkDevice, ScratchOfRecordedOpsIsReusedWithinACall) {
  std::mt19937 rng(61);
  const int64_t R = 37, C = 129;
  HostTensor a = random_tensor(DType::f32, Shape{C, R}, rng), b = random_tensor(DType::f32, Shape{C, R}, rng);
  HostTensor w = random_tensor(DType::f32, Shape{C}, rng);
  for (HostTensor* t : {&a, &b}) {  // [R, C] views of the transposes
    t->view.shape = Shape{R, C};
    t->view.strides[0] = 1;
    t->view.strides[1] = R;
  }
  auto da = to_device(a), db = to_device(b), dw = to_device(w);
  auto b1 = ctx().allocator().allocate(R * C * 4), b2 = ctx().allocator().allocate(R * C * 4);
  ASSERT_TRUE(b1.is_ok() && b2.is_ok());
  const auto y1 = vulkan::DeviceView::dense(b1->ref(), DType::f32, Shape{R, C});
  const auto y2 = vulkan::DeviceView::dense(b2->ref(), DType::f32, Shape{R, C});
  auto rec = std::move(vulkan::Recorder::create(ctx())).value();
  Attrs n(OpKind::rms_norm);
  n.set_f("eps", 1e-5);
  const uint64_t before = ctx().allocator().stats().allocated;
  ASSERT_TRUE(rec->record(OpKind::rms_norm, {da.view, dw.view}, {y1}, n).is_ok());
  const uint64_t after_first = ctx().allocator().stats().allocated;
  EXPECT_GE(after_first, before + static_cast<uint64_t>(R * C * 4)) << "the first norm copies its input into scratch";
  EXPECT_EQ(rec->barrier_count(), 1) << "copy, barrier, norm";
  ASSERT_TRUE(rec->record(OpKind::rms_norm, {db.view, dw.view}, {y2}, n).is_ok());
  EXPECT_EQ(ctx().allocator().stats().allocated, after_first) << "the second norm takes the first one's scratch";
  EXPECT_EQ(rec->barrier_count(), 3) << "a barrier before the second copy overwrites the first norm's input";
  ASSERT_TRUE(rec->submit_and_wait().is_ok());
  const auto wv = to_doubles(w.view);
  for (auto [x, y] : {std::pair{&a, &y1}, std::pair{&b, &y2}}) {
    const auto xv = to_doubles(x->view);
    std::vector<double> want;
    for (int64_t r = 0; r < R; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += xv[r * C + c] * xv[r * C + c];
      const double inv = 1 / std::sqrt(ss / C + 1e-5);
      for (int64_t c = 0; c < C; ++c) want.push_back(xv[r * C + c] * inv * wv[c]);
    }
    expect_close(to_doubles(to_host(*y).view), want, 1e-5, 1e-5, "rms_norm of a transposed input");
  }
}

// The driver's compiled pipelines go to a file named for the device, driver and kernel set, with
// the list of pipelines beside it; the next context reads them back and creates the listed
// pipelines before any call; an earlier build's files of the same device go, damaged data is
// ignored, and VRUN_PIPELINE_CACHE=0 turns the files off.
// On a context whose cache is empty every dispatch below needs a new pipeline: they are made on
// threads of their own while the call records, and the recorder holds the commands back (the
// dispatches, the barriers between them, a fill, the download) until it submits them, in order.
TEST_F(VkDevice, CommandsWaitInOrderForPipelinesMadeWhileTheCallRecords) {
  const char* old = std::getenv("VRUN_PIPELINE_CACHE");
  const std::string saved = old ? old : "";
  setenv("VRUN_PIPELINE_CACHE", "0", 1);
  vulkan::ContextOptions o;
  const char* layer = std::getenv("VRUN_VALIDATION");  // as the shared context (vk_test_util.h)
  o.validation = !(layer && std::string(layer) == "0");
  auto c = vulkan::Context::create(o);
  if (old) setenv("VRUN_PIPELINE_CACHE", saved.c_str(), 1);
  else unsetenv("VRUN_PIPELINE_CACHE");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  vulkan::Context& fresh = **c;
  ASSERT_EQ(fresh.pipelines().size(), 0u);
  std::mt19937 rng(62);
  HostTensor x = random_tensor(DType::f32, Shape{1000}, rng);
  auto in = fresh.allocator().allocate(4000), b1 = fresh.allocator().allocate(4000), b2 = fresh.allocator().allocate(4000),
       b3 = fresh.allocator().allocate(4000);
  ASSERT_TRUE(in.is_ok() && b1.is_ok() && b2.is_ok() && b3.is_ok());
  auto view = [](const vulkan::Buffer& b) { return vulkan::DeviceView::dense(b.ref(), DType::f32, Shape{1000}); };
  auto rec = std::move(vulkan::Recorder::create(fresh)).value();
  std::vector<double> want;
  for (size_t i = 0; i < 1000; ++i) {
    const double v = x.view.ptr<float>()[i];
    want.push_back((i < 100 ? 0.0 : 2 * v) + std::exp(v));
  }
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(rec->record_upload(x.view.ptr<float>(), in->ref(), 0, 4000).is_ok());
    Attrs s(OpKind::scale);
    s.set_f("scale", 2.0);
    ASSERT_TRUE(rec->record(OpKind::scale, {view(*in)}, {view(*b1)}, s).is_ok());
    ASSERT_TRUE(rec->record_zero(b1->ref(), 0, 400).is_ok());  // after the scale that wrote it
    ASSERT_TRUE(rec->record(OpKind::exp, {view(*in)}, {view(*b2)}, Attrs(OpKind::exp)).is_ok());
    ASSERT_TRUE(rec->record(OpKind::add, {view(*b1), view(*b2)}, {view(*b3)}, Attrs(OpKind::add)).is_ok());
    std::vector<float> got(1000);
    ASSERT_TRUE(rec->record_download(b3->ref(), 0, got.data(), 4000).is_ok());
    EXPECT_GE(fresh.pipelines().size(), 2u) << "call " << call;
    ASSERT_TRUE(rec->submit_and_wait().is_ok()) << "call " << call;
    expect_close(std::vector<double>(got.begin(), got.end()), want, 1e-6, 1e-6, call ? "second call" : "first call");
  }
  const size_t made = fresh.pipelines().size();
  EXPECT_GE(made, 2u);
  rec.reset();
  EXPECT_EQ(fresh.validation_errors(), 0u);
}

TEST_F(VkDevice, PipelinesPersistBetweenContexts) {
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/vrun-pipelines-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const fs::path dir(tmpl);
  const char* old = std::getenv("VRUN_PIPELINE_CACHE");
  const std::string saved = old ? old : "";
  setenv("VRUN_PIPELINE_CACHE", tmpl, 1);
  setenv("VRUN_PIPELINE_PREWARM", "1", 1);  // also on CPU implementations, where it is off by default
  std::mt19937 rng(61);
  HostTensor x = random_tensor(DType::f32, Shape{333}, rng);
  std::vector<double> want;
  for (double v : to_doubles(x.view)) want.push_back(3 * v);
  // One context: scale x by 3 on the device and check it; returns the context for its cache.
  size_t at_init = 0;  // pipelines the last context held before its first dispatch
  auto scale_on_new_context = [&](const char* what) {
    auto c = vulkan::Context::create();
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    std::unique_ptr<vulkan::Context> ctx2 = std::move(*c);
    at_init = ctx2->pipelines().size();
    auto in = ctx2->allocator().allocate(333 * 4), out = ctx2->allocator().allocate(333 * 4);
    auto rec = std::move(vulkan::Recorder::create(*ctx2)).value();
    EXPECT_TRUE(rec->record_upload(x.view.ptr<float>(), in->ref(), 0, 333 * 4).is_ok());
    Attrs s(OpKind::scale);
    s.set_f("scale", 3.0);
    EXPECT_TRUE(rec->record(OpKind::scale, {vulkan::DeviceView::dense(in->ref(), DType::f32, Shape{333})},
                            {vulkan::DeviceView::dense(out->ref(), DType::f32, Shape{333})}, s).is_ok());
    std::vector<float> got(333);
    EXPECT_TRUE(rec->record_download(out->ref(), 0, got.data(), 333 * 4).is_ok());
    EXPECT_TRUE(rec->submit_and_wait().is_ok());
    expect_close(std::vector<double>(got.begin(), got.end()), want, 1e-6, 1e-6, what);
    rec.reset();
    *in = vulkan::Buffer();
    *out = vulkan::Buffer();
    return ctx2;
  };
  std::string file;
  {
    auto c1 = scale_on_new_context("first context");
    file = c1->pipelines().file();
    ASSERT_EQ(fs::path(file).parent_path(), dir) << file;
    EXPECT_EQ(c1->pipelines().loaded_bytes(), 0u);
    EXPECT_EQ(at_init, 0u);
    // An earlier build's files for this device (same name but the kernel hash) and another device's.
    const std::string name = fs::path(file).filename().string();
    const std::string earlier = name.substr(0, name.size() - 20) + "0123456789abcdef";
    std::ofstream(dir / (earlier + ".bin")) << "old";
    std::ofstream(dir / (earlier + ".keys")) << "eltwise 1 2 3\n";
    std::ofstream(dir / ("ffff-" + name.substr(5))) << "other device";
    c1->pipelines().save();
  }
  ASSERT_TRUE(fs::exists(file));
  const auto bytes = fs::file_size(file);
  EXPECT_GT(bytes, 0u);
  const std::string keys = file.substr(0, file.size() - 4) + ".keys";
  std::string listed;
  {
    std::ifstream k(keys);
    listed.assign(std::istreambuf_iterator<char>(k), std::istreambuf_iterator<char>());
  }
  EXPECT_EQ(listed.rfind("eltwise ", 0), 0u) << "the keys file lists the scale's pipeline: " << listed;
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().extension() == ".bin" || e.path().extension() == ".keys";
  EXPECT_EQ(files, 3u) << "the earlier build's files should be gone, the other device's kept";
  // A line that is not a pipeline of this build is skipped, not fatal.
  std::ofstream(keys, std::ios::app) << "no_such_kernel 1 2\nnot numbers x y\n";
  {
    auto c2 = scale_on_new_context("second context, pipelines from the file");
    EXPECT_EQ(c2->pipelines().file(), file);
    EXPECT_EQ(c2->pipelines().loaded_bytes(), bytes);
    EXPECT_EQ(at_init, 1u) << "the listed pipeline should exist before the first dispatch";
    EXPECT_EQ(c2->pipelines().size(), 1u) << "the scale should have used the prewarmed pipeline";
  }
  std::ofstream(file, std::ios::binary | std::ios::trunc) << std::string(4096, '\x5a');
  { auto c3 = scale_on_new_context("third context, damaged cache file"); }
  setenv("VRUN_PIPELINE_CACHE", "0", 1);
  {
    auto c4 = scale_on_new_context("fourth context, cache off");
    EXPECT_EQ(c4->pipelines().file(), "");
  }
  if (old) setenv("VRUN_PIPELINE_CACHE", saved.c_str(), 1);
  else unsetenv("VRUN_PIPELINE_CACHE");
  unsetenv("VRUN_PIPELINE_PREWARM");
  fs::remove_all(dir);
}

TEST_F(VkDevice, UnsupportedOpIsRefusedNotFatal) {
  TensorDesc x{DType::f32, Shape{4, 8}};
  Attrs reflect(OpKind::pad);  // the GPU pads with zeros only
  reflect.set_ints("pads", {1, 1}).set_s("mode", "reflect");
  EXPECT_FALSE(vulkan::supports(ctx(), OpKind::pad, {&x}, reflect));
  EXPECT_FALSE(vulkan::supports(ctx(), OpKind::lstm, {&x}, Attrs(OpKind::lstm)));
  TensorDesc xi{DType::i32, Shape{4, 8}};
  EXPECT_FALSE(vulkan::supports(ctx(), OpKind::add, {&xi, &xi}, Attrs(OpKind::add)));
  auto buf = ctx().allocator().allocate(256);
  const auto v = vulkan::DeviceView::dense(buf->ref(), DType::f32, Shape{4, 8});
  auto rec = std::move(vulkan::Recorder::create(ctx())).value();
  Status s = rec->record(OpKind::pad, {v}, {v}, reflect);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported);
  EXPECT_NE(s.message().find("pad"), std::string::npos) << s.message();
  EXPECT_EQ(rec->dispatch_count(), 0);
}

// What the executor does for a node the GPU lacks: end the recording, run the node on the CPU
// over downloaded inputs, upload its output, and continue on the GPU.
TEST_F(VkDevice, CpuFallbackInsideAMethod) {
  std::mt19937 rng(61);
  HostTensor x = random_tensor(DType::f32, Shape{7, 33}, rng);
  auto dx = to_device(x);
  auto b1 = ctx().allocator().allocate(7 * 33 * 4), b2 = ctx().allocator().allocate(7 * 36 * 4),
       b3 = ctx().allocator().allocate(7 * 36 * 4);
  const auto y1 = vulkan::DeviceView::dense(b1->ref(), DType::f32, Shape{7, 33});
  const auto y2 = vulkan::DeviceView::dense(b2->ref(), DType::f32, Shape{7, 36});
  const auto y3 = vulkan::DeviceView::dense(b3->ref(), DType::f32, Shape{7, 36});
  auto rec = std::move(vulkan::Recorder::create(ctx())).value();
  ASSERT_TRUE(rec->record(OpKind::silu, {dx.view}, {y1}, Attrs(OpKind::silu)).is_ok());
  HostTensor h1 = make_tensor(DType::f32, Shape{7, 33});
  ASSERT_TRUE(rec->record_download(y1.buffer, 0, h1.view.data, y1.dense_bytes()).is_ok());
  ASSERT_TRUE(rec->submit_and_wait().is_ok());

  Attrs pd(OpKind::pad);
  pd.set_ints("pads", {1, 2}).set_f("value", 0.25);
  const TensorDesc d1{DType::f32, Shape{7, 33}};
  ASSERT_FALSE(vulkan::supports(ctx(), OpKind::pad, {&d1}, pd));
  RunResult cpu = run_cpu(OpKind::pad, {h1.view}, pd);
  ASSERT_TRUE(cpu.status.is_ok()) << cpu.status.to_string();
  ASSERT_TRUE(rec->record_upload(cpu.outputs[0].view.data, y2.buffer, 0, y2.dense_bytes()).is_ok());
  Attrs sc(OpKind::scale);
  sc.set_f("scale", 0.5).set_f("bias", 1.0);
  ASSERT_TRUE(rec->record(OpKind::scale, {y2}, {y3}, sc).is_ok());
  ASSERT_TRUE(rec->submit_and_wait().is_ok());

  HostTensor got = to_host(y3);
  const auto xv = to_doubles(x.view);
  std::vector<double> want;
  for (int r = 0; r < 7; ++r) {
    want.push_back(0.5 * 0.25 + 1.0);
    for (int c = 0; c < 33; ++c) want.push_back(0.5 * xv[r * 33 + c] / (1 + std::exp(-xv[r * 33 + c])) + 1.0);
    want.push_back(0.5 * 0.25 + 1.0);
    want.push_back(0.5 * 0.25 + 1.0);
  }
  expect_close(to_doubles(got.view), want, 1e-5, 1e-5, "gpu -> cpu pad -> gpu");
}

}  // namespace
}  // namespace vrun::test
