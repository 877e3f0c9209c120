# Run after linking a STABLE_ABI extension (cmake -DMODULE=<file> -P this):
# fails the build when the module imports a symbol of torch's C++ API, which
# would tie it to the torch release it was built against. Torch's stable ABI
# reaches libtorch through C functions only (aoti_torch_*, torch_*).
find_program(TORCHPLUG_NM nm REQUIRED)
execute_process(
  COMMAND "${TORCHPLUG_NM}" --dynamic --undefined-only --demangle "${MODULE}"
  OUTPUT_VARIABLE imported
  COMMAND_ERROR_IS_FATAL ANY)
# A namespace of torch as a whole word: "at::", not "format::".
string(REGEX MATCHALL "[^\n]*[^A-Za-z0-9_](c10|at|torch|caffe2)::[^\n]*" cxx_symbols "${imported}")
if(cxx_symbols)
  list(LENGTH cxx_symbols count)
  list(SUBLIST cxx_symbols 0 10 shown)
  string(REGEX REPLACE " *U " "" shown "${shown}")
  string(REPLACE ";" "\n  " shown "${shown}")
  message(FATAL_ERROR
    "${MODULE} is built with STABLE_ABI but imports ${count} symbol(s) of torch's C++ API, so it "
    "would load only into the torch it was built against:\n  ${shown}\n"
    "Use torch/csrc/stable (torch::stable::Tensor, STABLE_TORCH_LIBRARY, torch/headeronly) and "
    "torchplug/stable/kernel_scope.h instead of ATen, c10 and torch/library.h headers, or drop STABLE_ABI.")
endif()
