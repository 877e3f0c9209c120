#include "kernels/operator_arguments.h"

#include <string>

namespace torchplug {

bool host_index_argument(const c10::Argument& argument, const at::Tensor& tensor) {
  const auto& name = argument.name();
  const bool index_name = name.find("ind") != std::string::npos;
  return index_name && (at::isIntegralType(tensor.scalar_type(), /*includeBool=*/true));
}

bool writes_across_devices(const c10::OperatorHandle& op) {
  const std::string& name = op.schema().name();
  return name == "aten::copy_" || name == "aten::_foreach_copy_" || name == "aten::_copy_from" ||
         name == "aten::_copy_from_and_resize";
}

}  // namespace torchplug
