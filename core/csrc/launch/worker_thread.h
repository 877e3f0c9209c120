#pragma once
// Whether the calling thread is a stream worker running a queued kernel, or
// runs a kernel at its launch. What such a kernel launches in turn runs
// inline (it reads the results at once), and nothing on a worker may wait
// for its own stream. The allocator asks too, so this sits apart from
// the kernel launch, which depends on the allocator.
#include <cstdint>

namespace torchplug {

bool on_stream_worker_thread();

// The running queued kernel's place in its stream's order (driver::Stream::
// issued() when it was queued), for the allocator: memory the host freed
// after it was queued is still read by kernels queued in between, so its own
// allocations must not reuse it. Set by the worker before each kernel.
uint64_t running_kernel_issue();
void set_running_kernel_issue(uint64_t issue);

// Whether the calling thread runs a kernel at its launch (inside a KernelLaunch).
bool running_kernel_at_launch();

enum class RunningKernel { kQueuedOnWorker, kAtLaunch };

// Marks the calling thread as running a kernel of that kind while it lives.
class RunningKernelMark {
 public:
  explicit RunningKernelMark(RunningKernel kind);
  ~RunningKernelMark();
  RunningKernelMark(const RunningKernelMark&) = delete;
  RunningKernelMark& operator=(const RunningKernelMark&) = delete;

 private:
  RunningKernel kind_;
};

}  // namespace torchplug
