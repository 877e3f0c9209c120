#pragma once
// Whether the calling thread is a stream worker running a queued kernel, or
// runs a kernel at its launch. What such a kernel launches in turn runs
// inline (it reads the results at once), and nothing on a worker may wait
// for its own stream. The allocator asks too, so this sits apart from
// the kernel launch, which depends on the allocator.

namespace torchplug {

bool on_stream_worker_thread();

// Marks the calling thread as running a queued kernel while it lives.
class StreamWorkerMark {
 public:
  StreamWorkerMark();
  ~StreamWorkerMark();
  StreamWorkerMark(const StreamWorkerMark&) = delete;
  StreamWorkerMark& operator=(const StreamWorkerMark&) = delete;
};

// Whether the calling thread runs a kernel at its launch (inside a KernelLaunch).
bool running_kernel_at_launch();

// Marks the calling thread as running a kernel at its launch while it lives.
class KernelAtLaunchMark {
 public:
  KernelAtLaunchMark();
  ~KernelAtLaunchMark();
  KernelAtLaunchMark(const KernelAtLaunchMark&) = delete;
  KernelAtLaunchMark& operator=(const KernelAtLaunchMark&) = delete;
};

}  // namespace torchplug
