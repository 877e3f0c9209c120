#pragma once
// A CPU kernel call on device tensors queued on the device's stream, as a
// native kernel is, instead of run by the launching thread once the stream
// drained: the CPU fallback's and the host kernels' calls, and every hpu
// operator. The outputs are allocated before the kernel runs, shaped as the
// first call of the same signature's were (call_shapes.h: that call ran at
// once, and raised any error of the call's shapes and dtypes there); the CPU
// kernel then runs on the stream's worker over host aliases of the device
// memory, and its results are written into the outputs.
#include <cstdint>
#include <optional>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DispatchKeySet.h>

#include "kernels/call_shapes.h"
#include "profiler/device_activity.h"

namespace torchplug {

enum class HostCallQueueing {
  kQueued,  // the call is on the stream; `stack` holds its results
  // It runs now, as the CPU kernel on the launching thread: launches block,
  // its stream is idle and its work small, or it cannot be queued (below).
  kRunsNow,
  // It runs now and the host waits for the device: its results' sizes (or
  // values, as item()'s) depend on the data (nonzero, masked_select, unique).
  kWaitsForData,
};

struct HostCallQueued {
  HostCallQueueing outcome;
  c10::Device device{c10::kCPU};  // where a queued call runs
  // What a queued call moves: its device arguments' bytes and its new results'.
  uint64_t bytes = 0;
  // A call that runs now and would have been queued had its results' shapes
  // been known: the caller records them once it ran (learn_result_shapes).
  std::optional<CallToLearn> learn;
};

// Queues `op`'s call on `stack` (its arguments, device tensors among them)
// when it can be: a call of the same signature ran before (its results'
// shapes are known); the operator has a meta kernel (its results' shapes
// follow from the arguments' metadata); it draws no random numbers (their
// order would follow the stream's, not the program's); it writes no argument
// other than in place or out= of the right size; every device operand is on
// one host-addressable device, dense and strided, and the host operands are
// scalars or index tensors. Leaves `stack` as it was otherwise. torch.profiler
// shows the kernel as `kind`.
HostCallQueued queue_host_call(const c10::OperatorHandle& op, c10::DispatchKeySet cpu_keys,
                               torch::jit::Stack* stack, ActivityKind kind);

}  // namespace torchplug
