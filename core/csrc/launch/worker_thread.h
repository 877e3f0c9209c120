#pragma once
// Whether the calling thread is a stream worker running a queued kernel. What
// such a kernel launches in turn runs inline, and nothing on a worker may
// wait for its own stream. The allocator asks too, so this sits apart from
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

}  // namespace torchplug
