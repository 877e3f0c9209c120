// The IPC extension: handles of shareable memory (ipc_allocate, in
// memory.cpp) that another process opens. Shareable memory is a memory file
// (memfd) the owning platform holds open until the allocation is freed; its
// handle names that descriptor by the owner's pid and the descriptor's number,
// and the file by its inode, so the receiver can open it through
// /proc/<pid>/fd/<fd> and make sure it is still the same file. Nothing is
// named in a file system: a process that crashes leaves no file behind.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"

namespace torchplug::simulator {
namespace {

// What the handle's bytes hold; the rest of the TPD_IPC_HANDLE_SIZE bytes are 0.
struct HandleContents {
  char magic[8];  // kMagic: the handle is this driver's, in this layout
  uint64_t pid;   // the owning process
  uint64_t device_id;  // the memory file's device and inode, which a reused descriptor number does not share
  uint64_t inode;
  uint64_t size;  // the allocation's bytes
  int32_t fd;     // the owner's descriptor of the memory file
};
static_assert(sizeof(HandleContents) <= TPD_IPC_HANDLE_SIZE, "the handle must fit TPD_IPC_HANDLE_SIZE");

constexpr char kMagic[8] = {'T', 'P', 'D', 'S', 'I', 'M', 'H', '1'};

// Closes a descriptor when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) {
      close(fd_);
    }
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// What a handle records of a memory file. statx, not fstat: fstat is a
// symbol of glibc 2.33, newer than the manylinux_2_28 the driver keeps to.
struct FileIdentity {
  uint64_t device_id;
  uint64_t inode;
  uint64_t size;
};

FileIdentity file_identity(int fd) {
  struct statx status {};
  if (statx(fd, "", AT_EMPTY_PATH, STATX_INO | STATX_SIZE, &status) != 0) {
    throw Error(TPD_INTERNAL, std::string("statx of a shareable memory file failed: ") + std::strerror(errno) + ".");
  }
  return {(uint64_t{status.stx_dev_major} << 32) | status.stx_dev_minor, status.stx_ino, status.stx_size};
}

}  // namespace

void ipc::ipc_get_handle(TPD_Ipc_GetHandle_Args& args) {
  auto client = find_client(args.client);
  client->check_device_memory(args.pointer, 1, "TPD_Ipc_GetHandle_Args.pointer");
  const int fd = client->platform().shared_file(args.pointer);
  if (fd < 0) {
    throw Error(TPD_INVALID_ARGUMENT,
                "TPD_Ipc_GetHandle_Args.pointer is not the start of memory from ipc_allocate: the simulator shares "
                "only that memory (memory_allocate's is private to this process). Allocate what you share with "
                "ipc_allocate, and pass the address it returned.");
  }
  const FileIdentity file = file_identity(fd);
  HandleContents contents{};
  std::memcpy(contents.magic, kMagic, sizeof kMagic);
  contents.pid = static_cast<uint64_t>(getpid());
  contents.device_id = file.device_id;
  contents.inode = file.inode;
  contents.size = file.size;
  contents.fd = fd;
  std::memset(args.handle, 0, TPD_IPC_HANDLE_SIZE);
  std::memcpy(args.handle, &contents, sizeof contents);
}

void ipc::ipc_open(TPD_Ipc_Open_Args& args) {
  auto client = find_client(args.client, args.device);
  if (args.handle == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Ipc_Open_Args.handle is NULL; pass the TPD_IPC_HANDLE_SIZE bytes that "
                                      "ipc_get_handle gave.");
  }
  HandleContents contents{};
  std::memcpy(&contents, args.handle, sizeof contents);
  if (std::memcmp(contents.magic, kMagic, sizeof kMagic) != 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Ipc_Open_Args.handle is not a handle of the torchplug simulator; pass "
                                      "the bytes its ipc_get_handle gave, unchanged.");
  }
  const std::string owner = "process " + std::to_string(contents.pid);
  const std::string path = "/proc/" + std::to_string(contents.pid) + "/fd/" + std::to_string(contents.fd);
  const FileDescriptor file(open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    const int error = errno;
    if (error == EACCES || error == EPERM) {
      throw Error(TPD_INVALID_HANDLE, "Cannot open the shared memory of " + owner + " (" + path + "): " +
                                          std::strerror(error) + ". Open it as the user that runs that process.");
    }
    throw Error(TPD_INVALID_HANDLE, "The shared memory of " + owner + " is gone (" + path + ": " +
                                        std::strerror(error) + "): that process freed it, or exited. Keep the "
                                        "shared memory alive in its owner until every receiver has closed it.");
  }
  const FileIdentity identity = file_identity(file.get());
  if (identity.device_id != contents.device_id || identity.inode != contents.inode ||
      identity.size != contents.size) {
    throw Error(TPD_INVALID_HANDLE, "The shared memory of " + owner + " is gone: it was freed, and its descriptor " +
                                        std::to_string(contents.fd) + " now names another file. Keep the shared "
                                        "memory alive in its owner until every receiver has closed it.");
  }
  const auto size = static_cast<size_t>(contents.size);
  runtime::Platform& platform = client->platform();
  void* pointer = platform.map_shared(args.device, file.get(), size);
  try {
    client->add_allocation(pointer, size, Client::Origin::kOpened);
  } catch (...) {  // recording allocates: the mapping must not leak when it fails
    platform.free(pointer);
    throw;
  }
  args.pointer = pointer;
  args.size = size;
}

void ipc::ipc_close(TPD_Ipc_Close_Args& args) {
  auto client = find_client(args.client);
  client->remove_allocation(args.pointer, Client::Origin::kOpened);
  client->platform().free(args.pointer);
}

}  // namespace torchplug::simulator
