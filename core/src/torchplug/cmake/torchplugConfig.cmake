# CMake package for the native extensions of torchplug backends (and of the
# core itself). In a plugin's CMakeLists.txt:
#
#   find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
#   execute_process(COMMAND "${Python_EXECUTABLE}" -c "import torchplug; print(torchplug.get_cmake_dir())"
#                   OUTPUT_VARIABLE torchplug_DIR OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
#   find_package(torchplug CONFIG REQUIRED)
#   torchplug_add_extension(_C PY_LIMITED_API csrc/ops.cpp csrc/module.cpp)
#   install(TARGETS _C DESTINATION .)
#   torchplug_install_build_info(.)
#
# It sets the build up (C++20, hidden symbols, position-independent code,
# ccache when installed, Python if not found yet) and defines TORCH_SDK (the
# installed torch package), TORCH_BUILD_VERSION, TORCHPLUG_VERSION (the core
# built against), TORCHPLUG_INCLUDE_DIR (torchplug/kernel_scope.h) and
# TORCHPLUG_STABLE_ABI_TARGET (the torch STABLE_ABI extensions target).

# The build settings every torchplug extension shares, the core's included.
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_VISIBILITY_PRESET hidden)
set(CMAKE_VISIBILITY_INLINES_HIDDEN ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

# ccache, when installed, makes rebuilds in fresh build environments cheap;
# the fixed torch path set up below is what lets it hit.
find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
endif()

if(NOT TARGET Python::Module)
  find_package(Python 3.11 REQUIRED COMPONENTS Interpreter Development.Module)
endif()

get_filename_component(TORCHPLUG_INCLUDE_DIR "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
set(_torchplug_cmake_dir "${CMAKE_CURRENT_LIST_DIR}")

# The torch wheel's CMake config insists on a CUDA toolkit, so the include and
# library directories are taken straight from the installed package, located
# without importing torch. Builds go through a link at a fixed path so that
# compile commands (and ccache's and ninja's records) do not change when an
# isolated build environment lands in a new temporary directory.
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c
          "import importlib.util, os; print(os.path.dirname(importlib.util.find_spec('torch').origin))"
  OUTPUT_VARIABLE TORCH_PACKAGE_DIR
  OUTPUT_STRIP_TRAILING_WHITESPACE
  COMMAND_ERROR_IS_FATAL ANY)
set(TORCH_SDK "${CMAKE_BINARY_DIR}/torch-sdk")
file(CREATE_LINK "${TORCH_PACKAGE_DIR}" "${TORCH_SDK}" SYMBOLIC)
execute_process(
  COMMAND "${Python_EXECUTABLE}" -c "import importlib.metadata as m; print(m.version('torch'))"
  OUTPUT_VARIABLE TORCH_BUILD_VERSION
  OUTPUT_STRIP_TRAILING_WHITESPACE
  COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "Building against torch ${TORCH_BUILD_VERSION} at ${TORCH_PACKAGE_DIR}")

# The core these headers belong to: the project being built when it is the
# core itself, else the installed torchplug distribution (a plugin's build
# requirement). Recorded by torchplug_install_build_info.
if(PROJECT_NAME STREQUAL "torchplug")
  set(TORCHPLUG_VERSION "${SKBUILD_PROJECT_VERSION}")
else()
  execute_process(
    COMMAND "${Python_EXECUTABLE}" -c "import importlib.metadata as m; print(m.version('torchplug'))"
    OUTPUT_VARIABLE TORCHPLUG_VERSION
    OUTPUT_STRIP_TRAILING_WHITESPACE
    COMMAND_ERROR_IS_FATAL ANY)
endif()
# The oldest torch release the core supports: STABLE_ABI extensions target
# it, so that one build serves it and every later supported release.
set(TORCHPLUG_STABLE_ABI_TARGET "2.14")

file(STRINGS "${TORCHPLUG_INCLUDE_DIR}/torchplug/kernel_api.h" _torchplug_api_line
     REGEX "^#define TORCHPLUG_KERNEL_API_VERSION [0-9]+")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" TORCHPLUG_KERNEL_API_VERSION "${_torchplug_api_line}")

# Compiles `target` with manylinux_compat.h (x86-64 Linux): for a static
# library linked into an extension, whose objects must keep to the same
# symbol versions. torchplug_add_extension does it for the module itself.
function(torchplug_manylinux_symbols target)
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    target_compile_options(${target} PRIVATE "SHELL:-include ${_torchplug_cmake_dir}/manylinux_compat.h")
  endif()
endfunction()

# A Python extension module that compiles against torch's headers and loads
# torch's libraries from the torch package installed beside it.
#
#   torchplug_add_extension(<target> [PY_LIMITED_API] [STABLE_ABI] <source>...)
#
# PY_LIMITED_API builds against Python's stable ABI (3.11 and later): one
# module, `<target>.abi3.so`, for every CPython, which suits a module that
# uses only Python's limited C API (no pybind11, no torch/csrc Python
# headers); set `wheel.py-api = "cp311"` in [tool.scikit-build] to tag the
# wheel cp311-abi3. Without it the module is built for the running CPython.
# STABLE_ABI builds against torch's stable ABI (torch/csrc/stable,
# torchplug/stable/kernel_scope.h), targeting the oldest torch the core
# supports (TORCHPLUG_STABLE_ABI_TARGET), so one build loads into every
# supported torch; the build fails when the module calls torch's C++ API.
# On x86-64 Linux the module keeps to the glibc and libstdc++ symbol versions
# of torch's own wheels (manylinux_2_28, see manylinux_compat.h).
function(torchplug_add_extension target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "PY_LIMITED_API;STABLE_ABI" "" "")
  if(NOT arg_STABLE_ABI)
    set_property(GLOBAL PROPERTY TORCHPLUG_BUILDS_TORCH_CXX_ABI ON)
  endif()
  if(arg_PY_LIMITED_API)
    Python_add_library(${target} MODULE ${arg_UNPARSED_ARGUMENTS})
    target_compile_definitions(${target} PRIVATE Py_LIMITED_API=0x030B0000)
    set_target_properties(${target} PROPERTIES SUFFIX ".abi3.so")
  else()
    Python_add_library(${target} MODULE WITH_SOABI ${arg_UNPARSED_ARGUMENTS})
  endif()
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND CMAKE_SYSTEM_PROCESSOR STREQUAL "x86_64")
    target_sources(${target} PRIVATE "${_torchplug_cmake_dir}/manylinux_compat.cpp")
  endif()
  torchplug_manylinux_symbols(${target})
  # torch's headers need C++20.
  target_compile_features(${target} PRIVATE cxx_std_20)
  target_include_directories(${target} SYSTEM PRIVATE "${TORCH_SDK}/include" "${TORCHPLUG_INCLUDE_DIR}")
  target_link_libraries(${target} PRIVATE "${TORCH_SDK}/lib/libc10.so" "${TORCH_SDK}/lib/libtorch_cpu.so")
  set_target_properties(${target} PROPERTIES
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    INSTALL_RPATH "$ORIGIN/../torch/lib"
    BUILD_WITH_INSTALL_RPATH ON)
  if(arg_STABLE_ABI)
    string(REPLACE "." ";" _target_version "${TORCHPLUG_STABLE_ABI_TARGET}")
    list(GET _target_version 0 _major)
    list(GET _target_version 1 _minor)
    target_compile_definitions(${target} PRIVATE
      "TORCH_TARGET_VERSION=(((0ULL + ${_major}) << 56) | ((0ULL + ${_minor}) << 48))")
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND "${CMAKE_COMMAND}" "-DMODULE=$<TARGET_FILE:${target}>" -P
              "${_torchplug_cmake_dir}/check_stable_abi.cmake"
      VERBATIM)
    set_property(GLOBAL PROPERTY TORCHPLUG_BUILDS_STABLE_ABI ON)
  endif()
endfunction()

# Installs _build_info.py into `destination`: TORCH_VERSION (the torch built
# against), TORCHPLUG_VERSION and KERNEL_API_VERSION (the core's), and for a
# package whose extensions are all STABLE_ABI ones, TORCH_STABLE_ABI (the
# oldest torch they target), so that the package can refuse to load into a
# torch or a core it cannot run with, with a message that names both
# versions (torchplug.check_build). Call it after torchplug_add_extension.
function(torchplug_install_build_info destination)
  set(build_info "${CMAKE_BINARY_DIR}/_build_info.py")
  get_property(_stable GLOBAL PROPERTY TORCHPLUG_BUILDS_STABLE_ABI)
  get_property(_cxx GLOBAL PROPERTY TORCHPLUG_BUILDS_TORCH_CXX_ABI)
  set(_stable_line "")
  if(_stable AND NOT _cxx)
    set(_stable_line "TORCH_STABLE_ABI = \"${TORCHPLUG_STABLE_ABI_TARGET}\"\n")
  endif()
  file(WRITE "${build_info}"
    "\"\"\"Facts about this native build (generated by CMake).\"\"\"\n\n"
    "TORCH_VERSION = \"${TORCH_BUILD_VERSION}\"\n"
    "${_stable_line}"
    "TORCHPLUG_VERSION = \"${TORCHPLUG_VERSION}\"\n"
    "KERNEL_API_VERSION = ${TORCHPLUG_KERNEL_API_VERSION}\n")
  install(FILES "${build_info}" DESTINATION "${destination}")
endfunction()
