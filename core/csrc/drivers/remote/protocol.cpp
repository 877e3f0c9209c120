// The socket calls of the protocol, shared by both ends.
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "drivers/remote/protocol.h"
#include "runtime/spin_wait.h"

namespace torchplug::remote {

bool send_message(int socket, const void* header, size_t header_size, const void* payload, size_t payload_size,
                  int attached_fd) {
  iovec parts[2] = {{const_cast<void*>(header), header_size}, {const_cast<void*>(payload), payload_size}};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = payload_size > 0 ? 2 : 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (attached_fd >= 0) {
    message.msg_control = control;
    message.msg_controllen = sizeof control;
    cmsghdr* header_of_fd = CMSG_FIRSTHDR(&message);
    header_of_fd->cmsg_level = SOL_SOCKET;
    header_of_fd->cmsg_type = SCM_RIGHTS;
    header_of_fd->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(header_of_fd), &attached_fd, sizeof(int));
  }
  // A peer that is gone must not raise SIGPIPE in a process that did not ask for it.
  while (::sendmsg(socket, &message, MSG_NOSIGNAL) < 0) {
    if (errno == EINTR) {
      continue;
    }
    if (errno == EPIPE || errno == ECONNRESET || errno == EBADF) {
      return false;
    }
    throw std::system_error(errno, std::generic_category(), "sendmsg");
  }
  return true;
}

size_t receive_message(int socket, void* buffer, int* attached_fd) {
  iovec part{buffer, kMaxMessage};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t received = -1;
  const auto receive = [&](int flags) {
    while ((received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC | flags)) < 0 && errno == EINTR) {
    }
    return received >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  };
  if (!runtime::poll_until([&] { return receive(MSG_DONTWAIT); })) {
    receive(0);
  }
  if (received < 0) {
    if (errno == ECONNRESET || errno == EBADF) {
      return 0;
    }
    throw std::system_error(errno, std::generic_category(), "recvmsg");
  }
  int fd = -1;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_RIGHTS) {
      std::memcpy(&fd, CMSG_DATA(header), sizeof(int));
    }
  }
  if (attached_fd != nullptr) {
    *attached_fd = fd;
  } else if (fd >= 0) {
    ::close(fd);
  }
  return static_cast<size_t>(received);
}

}  // namespace torchplug::remote
