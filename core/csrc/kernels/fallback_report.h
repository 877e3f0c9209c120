#pragma once
// The fallback report: what the CPU fallback ran, per device type and
// operator, as torch_xla's metrics list the operators not lowered. An
// operator without a native kernel runs on the CPU through the fallback,
// slower than a kernel of the device would and without a word; the report
// says which operators did, how often, over how many bytes, for how long.
//
// Always on, so it costs one lookup a call: a thread finds an operator's
// counters in a cache of its own, and adds to them with relaxed atomics. The
// global lock is taken only when a thread meets an operator for the first
// time, and by the readers.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

namespace c10 {
class OperatorHandle;
}  // namespace c10

namespace torchplug {

struct FallbackCount {
  std::string op;  // schema name and overload: "aten::index_select", "aten::add.out"
  uint64_t calls;
  uint64_t bytes;  // of the dense tensors it read and the new tensors it returned
  int64_t nanoseconds;
};

// Counts one completed fallback call of `op` on `device`.
void count_fallback(const c10::OperatorHandle& op, c10::Device device, uint64_t bytes,
                    std::chrono::steady_clock::duration elapsed);

// The operators the fallback ran on devices of `type` since the last reset.
std::vector<FallbackCount> fallback_counts(c10::DeviceType type);
void reset_fallback_counts(c10::DeviceType type);

// Told once per device type and operator, on the operator's first fallback
// call on a host thread (a stream worker must never wait for what a notice
// may take, such as the GIL): the operator and the device it ran for. A reset
// does not repeat the notices. Must not throw.
using FallbackNotice = void (*)(const std::string& op, c10::Device device);
void set_fallback_notice(FallbackNotice notice);

}  // namespace torchplug
