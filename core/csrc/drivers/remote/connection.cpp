// Starting the device process and talking to it.
#include "drivers/remote/connection.h"

#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "runtime/spin_wait.h"
#include "torchplug/driver.h"

extern char** environ;

namespace torchplug::remote {
namespace {

Connection* connection = nullptr;
std::mutex connection_mutex;
thread_local uint64_t host_function_client = 0;
thread_local uint64_t host_function_stream = 0;

// The folder this library was loaded from: the device process and the
// simulator it serves are installed beside it.
std::string library_folder() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&library_folder), &info) == 0 || info.dli_fname == nullptr) {
    throw Error(TPD_INTERNAL, "The torchplug remote driver cannot find the folder it was loaded from.");
  }
  std::string path = info.dli_fname;
  return path.substr(0, path.rfind('/') + 1);
}

std::string how_it_ended(pid_t pid) {
  // It closed its socket when it ended; give it a moment to be reaped.
  for (int attempt = 0; attempt < 100; ++attempt) {
    int status = 0;
    const pid_t reaped = ::waitpid(pid, &status, WNOHANG);
    if (reaped == pid && WIFSIGNALED(status)) {
      return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    }
    if (reaped == pid && WIFEXITED(status)) {
      return "exited with status " + std::to_string(WEXITSTATUS(status));
    }
    if (reaped < 0) {
      break;  // reaped elsewhere (a SIGCHLD handler of the application)
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return "closed its connection";
}

}  // namespace

Connection& Connection::get() {
  std::lock_guard<std::mutex> lock(connection_mutex);
  if (connection == nullptr) {
    // Never destroyed: the receiving thread may run until the process exits.
    auto* started = new Connection();
    started->start();
    connection = started;
    ::pthread_atfork(nullptr, nullptr, forked_child);
  }
  return *connection;
}

uint64_t Connection::running_host_function_client() { return host_function_client; }

uint64_t Connection::running_host_function_stream() { return host_function_stream; }

void Connection::start() {
  const std::string folder = library_folder();
  const std::string program = folder + "torchplug-device";
  const std::string served = folder + "libtorchplug_simulator.so";
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) {
    throw Error(TPD_UNAVAILABLE, std::string("The torchplug remote driver could not create its socket pair: ") +
                                     std::strerror(errno) + ".");
  }
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  // dup2 onto the agreed descriptor clears close-on-exec there, and only there.
  ::posix_spawn_file_actions_adddup2(&actions, sockets[1], kDeviceProcessSocket);
  std::vector<char*> arguments{const_cast<char*>(program.c_str()), const_cast<char*>(served.c_str()), nullptr};
  const int spawned = ::posix_spawn(&pid_, program.c_str(), &actions, nullptr, arguments.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(sockets[1]);
  if (spawned != 0) {
    ::close(sockets[0]);
    throw Error(TPD_UNAVAILABLE, "The torchplug remote driver could not start its device process " + program + ": " +
                                     std::strerror(spawned) + "; reinstall torchplug.");
  }
  socket_ = sockets[0];
  std::thread([this] { receive(); }).detach();
  Request hello{};
  hello.op = Op::kHello;
  const Reply answer = call(hello);
  if (answer.values[0] != kProtocolVersion) {
    throw Error(TPD_VERSION_MISMATCH, "The device process " + program + " speaks protocol " +
                                          std::to_string(answer.values[0]) + ", not " +
                                          std::to_string(kProtocolVersion) + "; reinstall torchplug.");
  }
}

void Connection::post(Request request, const void* payload, size_t payload_size) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!unusable_.empty()) {
      throw Error(TPD_UNAVAILABLE, unusable_);
    }
  }
  request.id = kPostedRequest;
  bool sent = false;
  try {
    sent = send_message(socket_, &request, sizeof request, payload, payload_size);
  } catch (const std::system_error& error) {
    throw Error(TPD_INTERNAL, std::string("The torchplug remote driver could not send a request: ") + error.what());
  }
  if (!sent) {
    // The device process is gone: the receiving thread says how it ended.
    std::unique_lock<std::mutex> lock(mutex_);
    replied_.wait(lock, [&] { return !unusable_.empty(); });
    throw Error(TPD_UNAVAILABLE, unusable_);
  }
}

Reply Connection::call(Request request, const void* payload, size_t payload_size, int attached,
                       std::string* reply_payload) {
  Pending pending;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!unusable_.empty()) {
      throw Error(TPD_UNAVAILABLE, unusable_);
    }
    request.id = next_id_++;
    pending_[request.id] = &pending;
  }
  bool sent = false;
  try {
    sent = send_message(socket_, &request, sizeof request, payload, payload_size, attached);
  } catch (const std::system_error& error) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.erase(request.id);
    throw Error(TPD_INTERNAL, std::string("The torchplug remote driver could not send a request: ") + error.what());
  }
  if (sent) {
    // A reply may wait for the device's work (a copy from it), so it is polled for longer than a message.
    runtime::poll_until([&] { return pending.done.load(std::memory_order_acquire); }, 2 * runtime::kPollBeforeSleeping);
  }
  std::unique_lock<std::mutex> lock(mutex_);
  // A request that could not be sent gets no reply: the receiving thread sees
  // the device process's end and says how it came.
  replied_.wait(lock, [&] { return (sent && pending.done) || !unusable_.empty(); });
  pending_.erase(request.id);
  if (!pending.done) {
    throw Error(TPD_UNAVAILABLE, unusable_);
  }
  lock.unlock();
  if (pending.reply.code != TPD_SUCCESS) {
    throw Error(static_cast<TPD_ErrorCode>(pending.reply.code), pending.payload);
  }
  if (reply_payload != nullptr) {
    *reply_payload = std::move(pending.payload);
  }
  return pending.reply;
}

void Connection::receive() {
  std::vector<char> buffer(kMaxMessage);
  for (;;) {
    size_t size = 0;
    try {
      size = receive_message(socket_, buffer.data());
    } catch (const std::system_error&) {
      size = 0;
    }
    if (size == 0) {
      fail_all("The torchplug device process (pid " + std::to_string(pid_) + ") " + how_it_ended(pid_) +
               "; its devices' memory and queued work are lost. Restart the program to use the device again.");
      return;
    }
    if (size < sizeof(Reply)) {
      continue;
    }
    Reply reply;
    std::memcpy(&reply, buffer.data(), sizeof reply);
    if (reply.kind == ReplyKind::kRunHostFunction) {
      std::lock_guard<std::mutex> lock(mutex_);
      host_calls_.push_back({reply.id, reply.values[0], reply.values[1], reply.values[2], reply.values[3]});
      if (idle_host_threads_ == 0) {
        ++idle_host_threads_;
        std::thread([this] { run_host_calls(); }).detach();
      }
      host_call_queued_.notify_one();
      continue;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = pending_.find(reply.id);
    if (found != pending_.end()) {
      found->second->reply = reply;
      found->second->payload.assign(buffer.data() + sizeof reply, size - sizeof reply);
      found->second->done.store(true, std::memory_order_release);
      replied_.notify_all();
    }
  }
}

void Connection::run_host_calls() {
  // Each running call has a thread of its own: a host function may wait for
  // another stream, whose host functions must still run meanwhile.
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    host_call_queued_.wait(lock, [&] { return !host_calls_.empty(); });
    const HostCall call = host_calls_.front();
    host_calls_.pop_front();
    --idle_host_threads_;
    if (!host_calls_.empty() && idle_host_threads_ == 0) {
      ++idle_host_threads_;
      std::thread([this] { run_host_calls(); }).detach();
    }
    lock.unlock();
    char message[1024] = "";
    host_function_client = call.client;
    host_function_stream = call.stream;
    const auto function = reinterpret_cast<TPD_HostFunction>(static_cast<uintptr_t>(call.function));
    const int status = function(reinterpret_cast<void*>(static_cast<uintptr_t>(call.user_data)), message,
                                sizeof message);
    host_function_client = 0;
    host_function_stream = 0;
    Request done{};
    done.op = Op::kHostFunctionDone;
    done.id = call.id;
    done.value = status;
    const size_t length = status != 0 ? strnlen(message, sizeof message) : 0;
    try {
      send_message(socket_, &done, sizeof done, message, length);
    } catch (const std::system_error&) {
      // The device process is gone; the receiving thread reports it.
    }
    lock.lock();
    ++idle_host_threads_;
  }
}

void Connection::fail_all(std::string reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (unusable_.empty()) {
    unusable_ = std::move(reason);
  }
  replied_.notify_all();
}

void Connection::forked_child() {
  // The device process serves the parent; the child's copy of the socket is
  // closed so that the parent's exit still ends the device process.
  Connection* inherited = connection;
  if (inherited == nullptr) {
    return;
  }
  ::close(inherited->socket_);
  inherited->socket_ = -1;
  new (&inherited->mutex_) std::mutex();
  new (&inherited->replied_) std::condition_variable();
  new (&inherited->host_call_queued_) std::condition_variable();
  inherited->pending_.clear();
  inherited->host_calls_.clear();
  inherited->idle_host_threads_ = 0;
  inherited->unusable_ =
      "This process was forked from one whose devices were in use (the device process of pid " +
      std::to_string(inherited->pid_) +
      " serves the parent); use the devices in the parent, or start children with the spawn method.";
}

}  // namespace torchplug::remote
