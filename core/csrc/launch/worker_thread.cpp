#include "launch/worker_thread.h"

namespace torchplug {
namespace {

thread_local bool on_stream_worker = false;
thread_local int kernels_at_launch = 0;  // nested: a kernel's copy opens its own launch
thread_local uint64_t kernel_issue = 0;

}  // namespace

bool on_stream_worker_thread() { return on_stream_worker; }

bool running_kernel_at_launch() { return kernels_at_launch > 0; }

uint64_t running_kernel_issue() { return kernel_issue; }

void set_running_kernel_issue(uint64_t issue) { kernel_issue = issue; }

RunningKernelMark::RunningKernelMark(RunningKernel kind) : kind_(kind) {
  if (kind_ == RunningKernel::kQueuedOnWorker) {
    on_stream_worker = true;
  } else {
    ++kernels_at_launch;
  }
}

RunningKernelMark::~RunningKernelMark() {
  if (kind_ == RunningKernel::kQueuedOnWorker) {
    on_stream_worker = false;
  } else {
    --kernels_at_launch;
  }
}

}  // namespace torchplug
