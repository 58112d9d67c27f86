// tdt_greedy: the whole greedy loop as one dispatch of kernels/vulkan/tdt_greedy.comp.
// lstm: the input projection of every step is one linear up front (the matvec or matmul kernels,
// whatever weight dtype they take); each step is then one lstm_step dispatch that adds
// h_prev . w_hh^T and applies the cell. The recurrence runs in f32 (as the CPU kernel's does) and
// converts to the outputs' dtype at the end.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "runtime/base/knobs.h"
#include "kernels/vulkan/context.h"
#include "kernels/vulkan/ops.h"

namespace vrun::vulkan {

namespace {

Status record_lstm(Recorder& rec, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out) {
  const DeviceView& x_in = in[0];
  const DeviceView& h0_in = in[1];
  const DeviceView& c0 = in[2];
  const DeviceView& w_ih = in[3];
  const DeviceView& w_hh_in = in[4];
  const DeviceView none;
  const DeviceView& b_ih = in.size() > 5 ? in[5] : none;
  const DeviceView& b_hh = in.size() > 6 ? in[6] : none;
  const DeviceView &y = out[0], &h = out[1], &c = out[2];
  const int64_t B = x_in.shape[0], T = x_in.shape[1], H = h0_in.shape[1];
  if (B == 0 || H == 0) return Status::ok();
  if (T == 0) {
    VRUN_RETURN_IF_ERROR(rec.record_copy(h0_in, h));
    return rec.record_copy(c0, c);
  }

  // gx [B, T, 4H] = x . w_ih^T + b_ih (+ b_hh), in f32.
  DeviceView x = x_in;
  if (x.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(x, rec.scratch(DType::f32, x_in.shape));
    VRUN_RETURN_IF_ERROR(rec.record_copy(x_in, x));
  }
  VRUN_ASSIGN_OR_RETURN(DeviceView gx, rec.scratch(DType::f32, Shape{B, T, 4 * H}));
  VRUN_RETURN_IF_ERROR(record_linalg(rec, OpKind::linear, {x, w_ih, b_ih}, {gx}, Attrs(OpKind::linear)));
  if (b_hh.present()) VRUN_RETURN_IF_ERROR(record_elementwise(rec, OpKind::add, {gx, b_hh}, {gx}, Attrs(OpKind::add)));

  // The recurrence's own f32 buffers: the outputs themselves when they are f32.
  DeviceView ys = y, cs = c;
  if (y.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(ys, rec.scratch(DType::f32, y.shape));
  }
  if (c.dtype != DType::f32) {
    VRUN_ASSIGN_OR_RETURN(cs, rec.scratch(DType::f32, c.shape));
  }
  // The kernel reads c0 at the first step and writes h at the last: no copies around it.
  VRUN_ASSIGN_OR_RETURN(DeviceView c0d, rec.dense_view(c0));
  VRUN_ASSIGN_OR_RETURN(DeviceView h0, rec.dense_view(h0_in));
  VRUN_ASSIGN_OR_RETURN(DeviceView w_hh, rec.dense_view(w_hh_in));

  std::vector<Binding> bindings = {{&ys, true}, {&gx, false}, {&w_hh, false}, {&h0, false},
                                   {&cs, true}, {&c0d, false},  {&h, true}};
  VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
  uint32_t gx_groups, gy_groups;
  rec.grid_1d(static_cast<uint64_t>(B * H), &gx_groups, &gy_groups);
  for (int64_t t = 0; t < T; ++t) {
    PushWords pw;
    pw.u(B).u(T).u(H).u(t);
    for (uint32_t o : offs) pw.u(o);
    VRUN_RETURN_IF_ERROR(rec.dispatch("lstm_step", {dt_code(w_hh.dtype), dt_code(h0.dtype), dt_code(c0d.dtype), dt_code(h.dtype)},
                                      bindings, pw.w, pw.bytes(), gx_groups, gy_groups, 1));
  }
  if (y.dtype != DType::f32) VRUN_RETURN_IF_ERROR(rec.record_copy(ys, y));
  if (c.dtype != DType::f32) VRUN_RETURN_IF_ERROR(rec.record_copy(cs, c));
  return Status::ok();
}

// Workgroups of the tdt_greedy grid: enough for a subgroup per row of its widest phase, but never
// more than the device keeps resident at once (its grid barriers would wait forever on a
// workgroup that cannot start): one per multiprocessor at most, and one where the device does not
// say how many it has (a CPU implementation runs one workgroup at a time anyway).
// With several lanes each lane's grid gets its share of the multiprocessors (one workgroup
// when there are more lanes than multiprocessors: a grid of one needs no barrier, so nothing has
// to be resident side by side). VRUN_TDT_GROUPS sets the count per lane (tests, experiments).

uint32_t tdt_groups(const Context& ctx, int64_t widest, int64_t lanes) {
  if (const long v = knob_count(Knob::VRUN_TDT_GROUPS)) return static_cast<uint32_t>(v);
  const DeviceInfo& d = ctx.info();
  if (d.type == "cpu" || d.multiprocessors == 0) return 1;
  const int64_t subgroups = 256 / std::max<uint32_t>(d.subgroup_size, 1);
  const int64_t share = std::max<int64_t>(1, d.multiprocessors / std::max<int64_t>(lanes, 1));
  return static_cast<uint32_t>(std::clamp<int64_t>((widest + subgroups - 1) / subgroups, 1, share));
}

Status record_tdt_greedy(Recorder& rec, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out, const Attrs& a) {
  const int64_t L = a.i("layers"), P = a.i("pred_hidden"), J = a.i("joint_hidden"), V = a.i("vocab");
  const std::vector<int64_t>& durations = a.ints("durations");
  const int64_t D = static_cast<int64_t>(durations.size());
  if (!tdt_greedy_fits(a))
    return err(ErrorCode::kUnsupported, "vulkan tdt_greedy: ", D, " durations (at most 8), pred_hidden ", P, " (at most 2048), joint_hidden ", J,
               " (at most 4096)");
  VRUN_ASSIGN_OR_RETURN(DeviceView frames, rec.dense_view(in[0]));
  VRUN_ASSIGN_OR_RETURN(DeviceView control, rec.dense_view(in[1]));
  VRUN_ASSIGN_OR_RETURN(DeviceView state, rec.dense_view(in[2]));
  VRUN_ASSIGN_OR_RETURN(DeviceView weights, rec.dense_view(in[3]));
  VRUN_ASSIGN_OR_RETURN(DeviceView vectors, rec.dense_view(in[4]));
  const int64_t lanes = control.shape.rank == 2 ? control.shape[0] : 1;
  if (lanes < 1) return Status::ok();
  const uint32_t G = tdt_groups(rec.context(), std::max({P, J, V + D}), lanes);
  // Each lane has its own counters; lanes beyond what one counters block holds (or
  // VRUN_TDT_LANES) go in further dispatches, their bindings' offsets moved to their first lane.
  const int64_t per_lane = 4 + 8 * static_cast<int64_t>(G) + L * P, n_state = 2 * L * P + J, cap = a.i("capacity");
  int64_t most = Recorder::kCounterWords / per_lane;
  if (const long v = knob_count(Knob::VRUN_TDT_LANES)) most = std::min<int64_t>(most, v);
  if (most < 1)
    return err(ErrorCode::kUnsupported, "vulkan tdt_greedy: ", per_lane, " counters a lane (layers ", L, " x pred_hidden ", P, "), at most ",
               Recorder::kCounterWords);
  const DeviceView &emitted = out[0], &state_out = out[1];
  for (int64_t l0 = 0; l0 < lanes; l0 += most) {
    const int64_t n = std::min(most, lanes - l0);
    VRUN_ASSIGN_OR_RETURN(DeviceView counters, rec.counters(n * per_lane));
    std::vector<Binding> bindings = {{&emitted, true}, {&frames, false},  {&weights, false}, {&vectors, false},
                                     {&state, false},  {&state_out, true}, {&control, false}, {&counters, true}};
    VRUN_ASSIGN_OR_RETURN(auto offs, rec.binding_offsets(bindings));
    offs[0] += static_cast<uint32_t>(l0 * (cap + 1) * 4);
    offs[4] += static_cast<uint32_t>(l0 * n_state);
    offs[5] += static_cast<uint32_t>(l0 * n_state);
    offs[6] += static_cast<uint32_t>(l0 * 5);
    PushWords pw;
    for (uint32_t o : offs) pw.u(o);
    pw.u(L).u(P).u(J).u(V).u(D).u(frames.shape[0]).u(a.i("max_symbols")).u(cap);
    for (int64_t k = 0; k < 8; ++k) pw.u(k < D ? durations[static_cast<size_t>(k)] : 0);
    VRUN_RETURN_IF_ERROR(rec.dispatch("tdt_greedy", {dt_code(weights.dtype)}, bindings, pw.w, pw.bytes(), G, static_cast<uint32_t>(n), 1));
  }
  return Status::ok();
}

}  // namespace

bool tdt_kernel_wanted(const Context& ctx) {
  if (ctx.info().type != "cpu") return true;
  const char* e = knob_value(Knob::VRUN_TDT_KERNEL);
  return e && std::string(e) == "1";
}

bool tdt_greedy_fits(const Attrs& attrs) {
  return attrs.ints("durations").size() <= 8 && 2 * attrs.i("pred_hidden") <= 4096 && attrs.i("joint_hidden") <= 4096;
}

bool supports_rnn(const Context& ctx, OpKind op, const std::vector<const TensorDesc*>& inputs,
                  const Attrs& attrs) {
  const TensorDesc* x = inputs[0];
  auto in = [&](size_t k) { return input_at(inputs, k); };
  if (op == OpKind::tdt_greedy)
    return in(3) && is_act(in(3)->dtype) && tdt_greedy_fits(attrs) && tdt_kernel_wanted(ctx);
  // lstm: x, h0, c0, w_ih, w_hh, b_ih?, b_hh?
  const TensorDesc *h0 = in(1), *c0 = in(2), *w_ih = in(3), *w_hh = in(4);
  const TensorDesc *b_ih = in(5), *b_hh = in(6);
  return op == OpKind::lstm && is_act(x->dtype) && h0 && c0 && is_act(h0->dtype) && is_act(c0->dtype) &&
         w_ih && is_act(w_ih->dtype) && w_hh && is_act(w_hh->dtype) && (!b_ih || is_act(b_ih->dtype)) &&
         (!b_hh || is_act(b_hh->dtype));
}

Status record_rnn(Recorder& rec, OpKind op, const std::vector<DeviceView>& in, const std::vector<DeviceView>& out,
                  const Attrs& attrs) {
  if (op == OpKind::lstm) return record_lstm(rec, in, out);
  if (op == OpKind::tdt_greedy) return record_tdt_greedy(rec, in, out, attrs);
  return err(ErrorCode::kUnsupported, "vulkan: no kernel for ", op_name(op));
}

}  // namespace vrun::vulkan
