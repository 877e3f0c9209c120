#pragma once
// The remote driver's link to its device process: started on first use
// (posix_spawn of torchplug-device beside this library, serving the simulator
// beside it), one socket pair carrying requests and replies (protocol.h).
// Any thread may call; a receiving thread matches replies to their callers and
// hands the device process's host-function calls to threads that run them.
// When the device process dies, every waiting and later call fails with
// TPD_UNAVAILABLE naming how it ended; a child forked after the device process
// started cannot use it (its parent's device) and gets TPD_UNAVAILABLE too.
#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "drivers/common/errors.h"
#include "drivers/remote/protocol.h"

namespace torchplug::remote {

using drivers::Error;

class Connection {
 public:
  // The connection of this process, started on first call; throws Error.
  static Connection& get();

  // Sends `request` (with `payload` and an attached descriptor, or -1) and
  // waits for its reply; throws Error with the device process's code and
  // message when it failed. `reply_payload` (optional) takes the reply's bytes.
  Reply call(Request request, const void* payload = nullptr, size_t payload_size = 0, int attached = -1,
             std::string* reply_payload = nullptr);

  // Sends `request` without waiting for an answer (it gets none): for work
  // queued on a stream that was checked here, so only running it can fail,
  // which the device process reports as the stream's failure. Requests keep
  // their order, so a later call sees the work queued.
  void post(Request request, const void* payload = nullptr, size_t payload_size = 0);

  pid_t device_process() const { return pid_; }
  // The device-process client and stream of the host function this thread
  // runs, 0 outside one (a host function must not wait for its own stream).
  static uint64_t running_host_function_client();
  static uint64_t running_host_function_stream();

 private:
  struct Pending {
    std::atomic<bool> done{false};
    Reply reply{};
    std::string payload;
  };
  struct HostCall {
    uint64_t id, function, user_data, client, stream;
  };

  Connection() = default;
  void start();
  void receive();
  void run_host_calls();
  // Fails every waiting call and every later one with `reason`.
  void fail_all(std::string reason);
  static void forked_child();

  int socket_ = -1;
  pid_t pid_ = -1;
  std::mutex mutex_;
  std::condition_variable replied_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Pending*> pending_;
  std::string unusable_;  // why calls fail, once they do
  // Host-function calls waiting for a thread, and threads waiting for a call.
  std::condition_variable host_call_queued_;
  std::deque<HostCall> host_calls_;
  int idle_host_threads_ = 0;
};

}  // namespace torchplug::remote
