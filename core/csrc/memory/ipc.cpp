// Device tensors shared between processes, as CUDA shares them through IPC
// handles. Simulated device memory is host memory, so a storage that is
// shared moves into a memfd segment: every process maps the same pages, sees
// the others' writes, and the pages live until the last process unmaps them.
// (Shared pages are not protected in strict memory mode: another process may
// touch them at any time.)
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "memory/host_alias.h"
#include "launch/kernel_launch.h"

namespace torchplug {
namespace {

struct SharedSegment {
  int fd;
  void* pages;
  size_t nbytes;
};

void release_segment(void* context) {
  auto* segment = static_cast<SharedSegment*>(context);
  if (segment->nbytes > 0) {
    munmap(segment->pages, segment->nbytes);
  }
  close(segment->fd);
  delete segment;
}

// Mapped with one page at least: mmap refuses length 0.
void* map_segment(int fd, size_t nbytes) {
  void* pages = mmap(nullptr, nbytes > 0 ? nbytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  TORCH_CHECK(pages != MAP_FAILED, "Cannot map shared device memory (", nbytes, " bytes): ", std::strerror(errno),
              ".");
  return pages;
}

c10::DataPtr segment_data(SharedSegment* segment, c10::Device device) {
  return c10::DataPtr(segment->pages, segment, &release_segment, device);
}

void check_shareable(c10::Device device) {
  TORCH_CHECK(find_device_runtime(device.type()) != nullptr, "Cannot share a tensor on ", device,
              " between processes: no torchplug backend serves that device here. Install and enable its "
              "backend in this process too (see `torchplug doctor`).");
}

// The memfd holding `self`'s storage, moving the storage there first.
int64_t share_memory(const at::Tensor& self) {
  check_shareable(self.device());
  const c10::Storage& storage = self.storage();
  if (storage.data_ptr().get_deleter() == &release_segment) {
    return static_cast<SharedSegment*>(storage.data_ptr().get_context())->fd;
  }
  const KernelLaunch launch("share_memory_", self.device(), touched_memory({&self}), {ActivityKind::kMemcpy});
  const size_t nbytes = storage.nbytes();
  const int fd = memfd_create("torchplug-device-memory", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "Cannot create shared memory for a device tensor: ", std::strerror(errno), ".");
  if (ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, "Cannot size shared memory of ", nbytes, " bytes for a device tensor: ",
                std::strerror(error), ".");
  }
  auto* segment = new SharedSegment{fd, map_segment(fd, nbytes), nbytes};
  if (nbytes > 0) {
    std::memcpy(segment->pages, storage.data(), nbytes);
  }
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(segment_data(segment, self.device()));
  // A resize would move the storage back into private memory and silently
  // stop sharing, as resizing a shared CPU storage is refused too.
  impl->set_resizable(false);
  return fd;
}

// A uint8 device tensor over the shared segment behind `fd` (a descriptor this
// process owns; it is kept for sharing the storage onwards).
at::Tensor from_shared_memory(int64_t fd, int64_t nbytes, c10::Device device) {
  check_shareable(device);
  const c10::Device indexed(device.type(), checked_device_index(device.type(), device.index()));
  const auto bytes = static_cast<size_t>(nbytes);
  auto* segment = new SharedSegment{static_cast<int>(fd), map_segment(static_cast<int>(fd), bytes), bytes};
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, segment_data(segment, indexed), nullptr,
                       /*resizable=*/false);
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), device_key_set(indexed.type()),
                                                        caffe2::TypeMeta::Make<uint8_t>());
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous({nbytes});
  return tensor;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchplug, library) {
  library.def("share_memory_(Tensor(a!) self) -> int");
  library.def("from_shared_memory(int fd, int nbytes, Device device) -> Tensor");
  library.impl("share_memory_", c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(share_memory));
  library.impl("from_shared_memory", c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(from_shared_memory));
}

}  // namespace torchplug
