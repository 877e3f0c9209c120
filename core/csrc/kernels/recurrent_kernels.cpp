// The fused LSTM and GRU cells. For a PrivateUse1 tensor (as for CUDA and
// XPU) ATen's RNN layers (aten/src/ATen/native/RNN.cpp: LSTMCell, GRUCell)
// call `_thnn_fused_lstm_cell` / `_thnn_fused_gru_cell` on the gate
// projections, and autograd their `*_backward` operators; ATen has kernels for
// them on CUDA only, so the CPU fallback had nothing to run.
//
// Each kernel here is the CPU's unfused cell math (the `else` branch of those
// cells, and what autograd derives from it), written as the same sequence of
// ATen operators over the same memory layouts, on the device tensors: every
// step is a device kernel (or the CPU fallback) with its own launch, so a
// cell rounds as the CPU's does and runs on any driver, in strict memory mode
// and on HPU. The only difference from the CPU is where the biases are added:
// ATen passes the bias-free products here, so `gates + bias` is one more
// rounding where the CPU's `addmm` adds the bias inside its GEMM.
//
// Workspaces (saved for backward, shapes as torch's meta kernels give them):
// LSTM [B, 4H] = the activated gates (input, forget, cell, output); GRU
// [B, 5H] = reset gate, update gate, new gate, the hidden part of the new
// gate before the reset (W_hn h + b_hn) and hx, as CUDA's kernels keep them.
#include <optional>
#include <tuple>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/sigmoid_backward.h>
#include <ATen/ops/tanh_backward.h>
#include <ATen/ops/zeros_like.h>
#include <c10/util/Exception.h>

#include "registration/device_kernels.h"

namespace torchplug {
namespace {

constexpr int64_t kLstmGates = 4;
constexpr int64_t kGruGates = 3;
constexpr int64_t kGruWorkspaceParts = 5;

bool defined(const std::optional<at::Tensor>& tensor) { return tensor.has_value() && tensor->defined(); }

// The shapes ATen's cells pass: gates [B, gates * H], hidden [B, H], biases [gates * H].
void check_cell_sizes(const char* op, int64_t gates, const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                      const at::Tensor& hidden, const std::optional<at::Tensor>& input_bias,
                      const std::optional<at::Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && hidden.dim() == 2, op,
              ": expected 2-D input_gates [batch, ", gates, " * hidden_size] and a 2-D hidden state [batch, hidden_size], "
              "got input_gates of shape ",
              input_gates.sizes(), " and hidden state of shape ", hidden.sizes());
  TORCH_CHECK(input_gates.sizes() == hidden_gates.sizes(), op, ": input_gates ", input_gates.sizes(),
              " and hidden_gates ", hidden_gates.sizes(), " must have the same shape");
  TORCH_CHECK(input_gates.size(0) == hidden.size(0) && input_gates.size(1) == gates * hidden.size(1), op,
              ": gates of shape ", input_gates.sizes(), " do not fit a hidden state of shape ", hidden.sizes(),
              "; expected [", hidden.size(0), ", ", gates * hidden.size(1), "]");
  TORCH_CHECK(defined(input_bias) == defined(hidden_bias), op,
              ": pass both input_bias and hidden_bias, or neither");
  if (defined(input_bias)) {
    for (const at::Tensor& bias : {*input_bias, *hidden_bias}) {
      TORCH_CHECK(bias.dim() == 1 && bias.size(0) == input_gates.size(1), op, ": a bias must have shape [",
                  input_gates.size(1), "], got ", bias.sizes());
    }
  }
  for (const at::Tensor& tensor : {hidden_gates, hidden}) {
    TORCH_CHECK(tensor.device() == input_gates.device(), op, ": every tensor must be on ", input_gates.device(),
                ", got one on ", tensor.device(), "; move the module and its inputs to one device");
    TORCH_CHECK(tensor.scalar_type() == input_gates.scalar_type(), op, ": every tensor must be ",
                input_gates.scalar_type(), ", got one of ", tensor.scalar_type(), "; convert the module and inputs to one dtype");
  }
}

// The pre-activation gates as the CPU's cell builds them, in a fresh [B, n * H]
// tensor: (W_h h + b_h) + (W_i x + b_i).
at::Tensor summed_gates(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                        const std::optional<at::Tensor>& input_bias, const std::optional<at::Tensor>& hidden_bias) {
  if (!defined(input_bias)) {
    return hidden_gates.add(input_gates);
  }
  return hidden_gates.add(*hidden_bias).add_(input_gates.add(*input_bias));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(const at::Tensor& input_gates,
                                                               const at::Tensor& hidden_gates, const at::Tensor& cx,
                                                               const std::optional<at::Tensor>& input_bias,
                                                               const std::optional<at::Tensor>& hidden_bias) {
  check_cell_sizes("_thnn_fused_lstm_cell", kLstmGates, input_gates, hidden_gates, cx, input_bias, hidden_bias);
  at::Tensor gates = summed_gates(input_gates, hidden_gates, input_bias, hidden_bias);
  // Activated in place: `gates` becomes the workspace.
  const std::vector<at::Tensor> chunks = gates.unsafe_chunk(kLstmGates, 1);
  const at::Tensor& in_gate = chunks[0].sigmoid_();
  const at::Tensor& forget_gate = chunks[1].sigmoid_();
  const at::Tensor& cell_gate = chunks[2].tanh_();
  const at::Tensor& out_gate = chunks[3].sigmoid_();
  at::Tensor cy = forget_gate.mul(cx).add_(in_gate.mul(cell_gate));
  at::Tensor hy = out_gate.mul(cy.tanh());
  return {std::move(hy), std::move(cy), std::move(gates)};
}

// Returns (grad of the gates [B, 4H], grad of cx, grad of each bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx,
    const at::Tensor& cy, const at::Tensor& workspace, bool has_bias) {
  if (!defined(grad_hy) && !defined(grad_cy)) {
    return {};
  }
  TORCH_CHECK(workspace.dim() == 2 && cx.dim() == 2 && workspace.size(1) == kLstmGates * cx.size(1) &&
                  cy.sizes() == cx.sizes(),
              "_thnn_fused_lstm_cell_backward: the workspace ", workspace.sizes(), ", cx ", cx.sizes(), " and cy ",
              cy.sizes(), " are not those of one _thnn_fused_lstm_cell call");
  const std::vector<at::Tensor> gates = workspace.unsafe_chunk(kLstmGates, 1);
  const at::Tensor& in_gate = gates[0];
  const at::Tensor& forget_gate = gates[1];
  const at::Tensor& cell_gate = gates[2];
  const at::Tensor& out_gate = gates[3];
  // hy = o * tanh(cy); cy is also an output of its own.
  at::Tensor grad_out;
  at::Tensor grad_c = defined(grad_cy) ? *grad_cy : at::Tensor();
  if (defined(grad_hy)) {
    const at::Tensor tanh_cy = cy.tanh();
    grad_out = at::sigmoid_backward(grad_hy->mul(tanh_cy), out_gate);
    at::Tensor through_h = at::tanh_backward(grad_hy->mul(out_gate), tanh_cy);
    grad_c = grad_c.defined() ? grad_c.add(through_h) : std::move(through_h);
  } else {
    grad_out = at::zeros_like(cx, at::MemoryFormat::Contiguous);
  }
  // cy = f * cx + i * g
  at::Tensor grad_in = at::sigmoid_backward(grad_c.mul(cell_gate), in_gate);
  at::Tensor grad_forget = at::sigmoid_backward(grad_c.mul(cx), forget_gate);
  at::Tensor grad_cell = at::tanh_backward(grad_c.mul(in_gate), cell_gate);
  at::Tensor grad_cx = grad_c.mul(forget_gate);
  at::Tensor grad_gates = at::cat({grad_in, grad_forget, grad_cell, grad_out}, 1);
  at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {std::move(grad_gates), std::move(grad_cx), std::move(grad_bias)};
}

std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                  const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                                  const std::optional<at::Tensor>& hidden_bias) {
  check_cell_sizes("_thnn_fused_gru_cell", kGruGates, input_gates, hidden_gates, hx, input_bias, hidden_bias);
  const bool has_bias = defined(input_bias);
  const at::Tensor input_part = has_bias ? input_gates.add(*input_bias) : input_gates;
  at::Tensor hidden_part = has_bias ? hidden_gates.add(*hidden_bias) : hidden_gates.clone();
  const std::vector<at::Tensor> in = input_part.unsafe_chunk(kGruGates, 1);
  const std::vector<at::Tensor> hid = hidden_part.unsafe_chunk(kGruGates, 1);
  const at::Tensor reset_gate = hid[0].add_(in[0]).sigmoid_();
  const at::Tensor update_gate = hid[1].add_(in[1]).sigmoid_();
  // hid[2] (W_hn h + b_hn) stays as it is: the workspace keeps it.
  const at::Tensor new_gate = in[2].add(hid[2].mul(reset_gate)).tanh_();
  at::Tensor hy = hx.sub(new_gate).mul_(update_gate).add_(new_gate);
  at::Tensor workspace = at::cat({reset_gate, update_gate, new_gate, hid[2], hx}, 1);
  return {std::move(hy), std::move(workspace)};
}

// Returns (grad of input_gates, grad of hidden_gates, grad of hx, grad of input_bias, grad of hidden_bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor& grad_hy, const at::Tensor& workspace, bool has_bias) {
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == kGruWorkspaceParts * grad_hy.size(1),
              "_thnn_fused_gru_cell_backward: grad_hy ", grad_hy.sizes(), " and the workspace ", workspace.sizes(),
              " are not those of one _thnn_fused_gru_cell call (expected a workspace of [batch, 5 * hidden_size])");
  const std::vector<at::Tensor> saved = workspace.unsafe_chunk(kGruWorkspaceParts, 1);
  const at::Tensor& reset_gate = saved[0];
  const at::Tensor& update_gate = saved[1];
  // The CPU's autograd holds these as fresh (contiguous) tensors.
  const at::Tensor new_gate = saved[2].contiguous();
  const at::Tensor hidden_new = saved[3].contiguous();
  const at::Tensor hx = saved[4].contiguous();
  // hy = (hx - n) * z + n
  at::Tensor grad_hx = grad_hy.mul(update_gate);
  at::Tensor grad_update = at::sigmoid_backward(grad_hy.mul(hx.sub(new_gate)), update_gate);
  // n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
  const at::Tensor grad_new = at::tanh_backward(grad_hy.add(grad_hx.neg()), new_gate);
  at::Tensor grad_hidden_new = grad_new.mul(reset_gate);
  at::Tensor grad_reset = at::sigmoid_backward(grad_new.mul(hidden_new), reset_gate);
  at::Tensor grad_input_gates = at::cat({grad_reset, grad_update, grad_new}, 1);
  at::Tensor grad_hidden_gates = at::cat({grad_reset, grad_update, grad_hidden_new}, 1);
  at::Tensor grad_input_bias = has_bias ? grad_input_gates.sum(0) : at::Tensor();
  at::Tensor grad_hidden_bias = has_bias ? grad_hidden_gates.sum(0) : at::Tensor();
  return {std::move(grad_input_gates), std::move(grad_hidden_gates), std::move(grad_hx), std::move(grad_input_bias),
          std::move(grad_hidden_bias)};
}

}  // namespace

void register_recurrent_kernels(DeviceKernels& library) {
  library.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  library.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  library.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  library.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace torchplug
