#include "launch/worker_thread.h"

namespace torchplug {
namespace {

thread_local bool on_stream_worker = false;

}  // namespace

bool on_stream_worker_thread() { return on_stream_worker; }

StreamWorkerMark::StreamWorkerMark() { on_stream_worker = true; }

StreamWorkerMark::~StreamWorkerMark() { on_stream_worker = false; }

}  // namespace torchplug
