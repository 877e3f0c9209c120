// Device tensors shared between processes as CUDA shares them, through the
// driver's IPC extension alone (driver/ipc.h). A storage that is shared moves
// into memory the driver can share, copied by the driver on the current
// stream; its handle (plain bytes) goes to the other process, which opens it
// once and closes it when the storage it backs is freed. As with CUDA, the
// sender keeps its tensor alive while receivers use it; what a driver does
// with memory still opened when its owner frees it is the driver's (see
// TPD_IpcExtension in torchplug/driver.h).
#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include "backend/backend.h"
#include "driver/device_runtime.h"
#include "driver/ipc.h"
#include "driver/stream.h"
#include "launch/worker_thread.h"
#include "memory/host_alias.h"
#include "registration/kernels.h"

namespace torchplug {
namespace {

// The context of a shared storage's DataPtr.
struct SharedMemory {
  driver::DeviceRuntime* runtime;
  c10::Device device;
  void* pointer;
  driver::IpcHandle handle;  // what a process that shares the storage onwards sends
  bool opened;               // mapped by ipc_open (closed), else from ipc_allocate (freed)
};

void release_shared(void* context) {
  std::unique_ptr<SharedMemory> shared(static_cast<SharedMemory*>(context));
  try {
    // Work queued before the last reference went may still use the memory (as
    // the allocator's emptyCache waits); a stream worker must not wait for itself.
    if (!on_stream_worker_thread()) {
      shared->runtime->wait_idle(shared->device.index());
    }
    if (shared->opened) {
      driver::ipc_close(*shared->runtime, shared->pointer);
    } else {
      shared->runtime->free(shared->pointer);
    }
  } catch (const std::exception& error) {  // a deleter must not throw
    TORCH_WARN("Releasing memory of ", shared->device, " shared between processes failed: ", error.what());
  }
}

c10::DataPtr shared_data(SharedMemory* shared) {
  return c10::DataPtr(shared->pointer, shared, &release_shared, shared->device);
}

void check_shareable(c10::Device device) {
  TORCH_CHECK(find_device_runtime(device.type()) != nullptr, "Cannot share a tensor on ", device,
              " between processes: no torchplug backend serves that device here. Install and enable its "
              "backend in this process too (see `torchplug doctor`).");
}

std::vector<int64_t> handle_values(const driver::IpcHandle& handle) { return {handle.begin(), handle.end()}; }

// The IPC handle of `self`'s storage (TPD_IPC_HANDLE_SIZE byte values),
// moving the storage into shareable memory first; none for an empty storage.
std::vector<int64_t> share_memory(const at::Tensor& self) {
  check_shareable(self.device());
  const c10::Storage& storage = self.storage();
  if (storage.data_ptr().get_deleter() == &release_shared) {
    return handle_values(static_cast<SharedMemory*>(storage.data_ptr().get_context())->handle);
  }
  const size_t nbytes = storage.nbytes();
  if (nbytes == 0) {
    return {};
  }
  driver::DeviceRuntime& runtime = device_runtime(self.device().type());
  const driver::Stream& stream = runtime_stream(current_stream(self.device()));
  const void* source = storage.data();
  c10::DataPtr data = translate_runtime_errors([&] {
    void* pointer = driver::ipc_allocate(runtime, self.device().index(), nbytes);
    auto* shared = new SharedMemory{&runtime, self.device(), pointer, {}, /*opened=*/false};
    c10::DataPtr owned = shared_data(shared);  // frees the memory if what follows fails
    shared->handle = driver::ipc_get_handle(runtime, pointer);
    if (runtime.device_of(source) >= 0) {
      stream.copy_async(pointer, source, nbytes, TPD_COPY_DEVICE_TO_DEVICE);
    } else {
      // Host memory the allocator adopted as device memory (a fallback
      // kernel's result): the driver reads it now, so the work queued to write it must have run.
      stream.synchronize();
      stream.copy_async(pointer, source, nbytes, TPD_COPY_HOST_TO_DEVICE);
    }
    // The receiver may read as soon as it has the handle.
    stream.synchronize();
    return owned;
  });
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  impl->set_data_ptr_noswap(std::move(data));
  // A resize would move the storage back into private memory and silently
  // stop sharing, as resizing a shared CPU storage is refused too.
  impl->set_resizable(false);
  return handle_values(static_cast<SharedMemory*>(storage.data_ptr().get_context())->handle);
}

// A uint8 device tensor of `nbytes` over the memory `handle` (from
// share_memory_ in any process) names; an empty one for no handle.
at::Tensor from_ipc_handle(c10::IntArrayRef handle, int64_t nbytes, c10::Device device) {
  check_shareable(device);
  ensure_kernels_registered(device.type());  // the memory is opened, not allocated
  const c10::Device indexed(device.type(), checked_device_index(device.type(), device.index()));
  const auto bytes = static_cast<size_t>(nbytes);
  c10::DataPtr data(nullptr, indexed);
  if (!handle.empty()) {
    TORCH_CHECK(handle.size() == TPD_IPC_HANDLE_SIZE && nbytes > 0, "An IPC handle of ", indexed, " has ",
                TPD_IPC_HANDLE_SIZE, " bytes and names a storage of at least one byte, not ", handle.size(),
                " bytes for ", nbytes, "; pass what share_memory_ returned.");
    driver::IpcHandle raw{};
    std::transform(handle.begin(), handle.end(), raw.begin(),
                   [](int64_t value) { return static_cast<unsigned char>(value); });
    driver::DeviceRuntime& runtime = device_runtime(indexed.type());
    data = translate_runtime_errors([&] {
      const driver::IpcMapping mapping = driver::ipc_open(runtime, indexed.index(), raw);
      c10::DataPtr opened = shared_data(new SharedMemory{&runtime, indexed, mapping.pointer, raw, /*opened=*/true});
      TORCH_CHECK(mapping.size >= bytes, "The shared memory of ", indexed, " holds ", mapping.size,
                  " bytes, fewer than the ", nbytes, " of the storage sent; send the handle and size together.");
      return opened;
    });
  }
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data), nullptr, /*resizable=*/false);
  auto tensor = at::detail::make_tensor<c10::TensorImpl>(std::move(storage), device_key_set(indexed.type()),
                                                        caffe2::TypeMeta::Make<uint8_t>());
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous({nbytes});
  return tensor;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torchplug, library) {
  library.def("share_memory_(Tensor(a!) self) -> int[]");
  library.def("from_ipc_handle(int[] handle, int nbytes, Device device) -> Tensor");
  library.impl("share_memory_", c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(share_memory));
  library.impl("from_ipc_handle", c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(from_ipc_handle));
}

}  // namespace torchplug
