#include "runtime/event.h"

#include <string>
#include <utility>

#include "runtime/errors.h"
#include "runtime/stream.h"

namespace torchplug::runtime {

void Event::Mark::complete(std::exception_ptr failure) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    time = std::chrono::steady_clock::now();
    error = std::move(failure);
    done = true;
  }
  done_cv.notify_all();
}

void Event::Mark::wait() {
  std::unique_lock<std::mutex> lock(mutex);
  done_cv.wait(lock, [&] { return done; });
}

std::shared_ptr<Event::Mark> Event::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mark_;
}

void Event::record(Stream& stream) {
  auto mark = std::make_shared<Mark>();
  mark->stream = &stream;
  if (stream.query()) {
    mark->complete(stream.pending_error());  // nothing pending: the stream is at this point now
  } else {
    stream.enqueue([mark] { mark->complete(mark->stream->pending_error()); });
  }
  std::lock_guard<std::mutex> lock(mutex_);
  mark_ = std::move(mark);
  device_ = stream.device();
}

bool Event::recorded() const { return current() != nullptr; }

int Event::device() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return device_;
}

bool Event::query() const {
  auto mark = current();
  if (!mark) {
    return true;
  }
  std::lock_guard<std::mutex> lock(mark->mutex);
  return mark->done;
}

void Event::synchronize() const {
  auto mark = current();
  if (!mark) {
    return;
  }
  mark->wait();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mark->mutex);
    error = std::exchange(mark->error, nullptr);
  }
  if (error && mark->stream->forget_error(error)) {
    std::rethrow_exception(error);
  }
}

void Event::block(Stream& stream) const {
  auto mark = current();
  if (!mark || query()) {
    return;
  }
  stream.enqueue([mark] { mark->wait(); });
}

double Event::elapsed_ms(const Event& end) const {
  if (!enable_timing_ || !end.enable_timing_) {
    throw RuntimeError(
        "Events were not created with timing enabled; create both with "
        "enable_timing=True to measure elapsed time.");
  }
  auto start_mark = current();
  auto end_mark = end.current();
  if (!start_mark || !end_mark) {
    throw RuntimeError("Both events must be recorded before measuring elapsed time.");
  }
  if (device() != end.device()) {
    // Each device has its own clock, as CUDA's do: a difference between them means nothing.
    throw RuntimeError("elapsed_time() needs two events recorded on the same device, but they were "
                       "recorded on devices " + std::to_string(device()) + " and " +
                       std::to_string(end.device()) + "; record both on streams of one device.");
  }
  start_mark->wait();
  end_mark->wait();
  return std::chrono::duration<double, std::milli>(end_mark->time - start_mark->time).count();
}

std::optional<std::chrono::steady_clock::time_point> Event::completion_time() const {
  auto mark = current();
  if (!mark) {
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mark->mutex);
  if (!mark->done) {
    return std::nullopt;
  }
  return mark->time;
}

}  // namespace torchplug::runtime
