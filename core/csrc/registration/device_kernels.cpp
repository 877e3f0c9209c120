#include "registration/device_kernels.h"

#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/dispatch/Dispatcher.h>

namespace torchplug {

bool DeviceKernels::given_elsewhere(const char* name) const {
  const std::string_view text(name);
  const size_t dot = text.find('.');
  c10::OperatorName op_name("aten::" + std::string(text.substr(0, dot)),
                            dot == std::string_view::npos ? "" : std::string(text.substr(dot + 1)));
  const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(op_name);
  return op.has_value() && op->hasKernelForDispatchKey(key_);
}

std::string DeviceKernels::operator_name(const char* qualified_name, const char* overload_name) {
  std::string_view name(qualified_name);
  name.remove_prefix(name.find("::") + 2);
  std::string result(name);
  if (*overload_name != '\0') {
    result.append(".").append(overload_name);
  }
  return result;
}

}  // namespace torchplug
