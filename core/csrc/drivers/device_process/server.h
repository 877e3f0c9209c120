#pragma once
// The device process's side of the remote driver's protocol
// (drivers/remote/protocol.h): it serves one using process over its socket,
// calling the driver it loaded (the simulator, whose memory is this process's
// own) for every request. The using process never sees a byte of that memory
// but through the copies served here.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "drivers/remote/protocol.h"
#include "torchplug/driver.h"

namespace torchplug::device_process {

// A request's failure, answered to the using process with its code.
struct Failure {
  TPD_ErrorCode code;
  std::string message;
};

class Server {
 public:
  Server(const TPD_Api& api, int socket) : api_(api), socket_(socket) {}
  // Serves requests until the using process closes its end.
  void run();

  // Sends a reply (and its payload) to the using process.
  void reply(uint64_t id, const remote::Reply& reply, const void* payload = nullptr, size_t size = 0);
  void reply_failure(uint64_t id, const Failure& failure);
  // reply_failure, or for a posted request (which gets no reply) the failure of its stream.
  void answer_failure(const remote::Request& request, const Failure& failure);
  // Runs a host function of the using process and waits for its result
  // (the device process's stand-in for a function it cannot call itself).
  int run_host_function(uint64_t client, uint64_t stream, uint64_t function, uint64_t user_data,
                        std::string& message);

 private:
  struct HostCall {
    bool done = false;
    int status = 0;
    std::string message;
  };

  // Whether a request that may wait (may_wait) would return at once: its
  // stream has nothing queued, its event completed, or a handle is bad
  // (which fails at once).
  bool settled(const remote::Request& request);
  // Answers one request; `attached` is a descriptor sent with it (or -1),
  // which the handler owns.
  void handle(const remote::Request& request, const char* payload, size_t payload_size, int attached);
  // Fills `answer` and its payload (device properties) for the request.
  void serve(const remote::Request& request, const char* payload, size_t payload_size, int attached,
             remote::Reply& answer, std::string& answer_payload);
  void copy_to_device(const remote::Request& request, const char* payload, size_t payload_size, int attached);
  void copy_from_device(const remote::Request& request, int attached);
  // Sets the simulator's device count and capacity (0 keeps either) before the devices are used.
  void configure(TPD_Client* client, int device_count, uint64_t capacity);
  // Throws Failure for a range that is not device memory of the client.
  void check_device_range(uint64_t client, uint64_t pointer, uint64_t size, const char* what);
  // The address in this process of `size` bytes at `offset` of a registered pinned block.
  char* registered(uint64_t host, uint64_t offset, uint64_t size);
  void finish_host_call(uint64_t id, int status, std::string message);
  // The served driver's extension of `type`; throws Failure (TPD_UNSUPPORTED) when it has none.
  template <typename Extension>
  const Extension& served_extension(TPD_ExtensionType type, const char* what) const {
    for (const TPD_ExtensionBase* extension = api_.extension_start; extension != nullptr;
         extension = extension->next) {
      if (extension->type == type) {
        return *reinterpret_cast<const Extension*>(extension);
      }
    }
    throw Failure{TPD_UNSUPPORTED, std::string("The device process's driver has no ") + what + " extension."};
  }
  // Throws Failure when `error` is not NULL (and destroys it).
  void check(TPD_Error* error);
  // Runs a driver call, raising its error as a Failure; returns the arguments
  // with the call's outputs filled in.
  template <typename Args>
  Args call(TPD_Error* (*function)(Args*), Args args) {
    check(function(&args));
    return args;
  }
  void enqueue_host_function(uint64_t client, uint64_t stream, TPD_HostFunction function, void* data);

  const TPD_Api& api_;
  const int socket_;
  std::mutex mutex_;
  std::condition_variable host_call_done_;
  uint64_t next_host_call_ = 1;
  std::map<uint64_t, HostCall> host_calls_;
  std::map<uint64_t, std::map<uint64_t, uint64_t>> allocations_;  // client -> device pointer -> bytes
  std::map<uint64_t, std::pair<char*, uint64_t>> pinned_;          // the using process's address -> (ours, bytes)
};

}  // namespace torchplug::device_process
