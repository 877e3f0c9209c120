#!/usr/bin/env bash
# Builds the core's native modules with AddressSanitizer and
# UndefinedBehaviorSanitizer and runs the core's runtime, memory, stream, IPC
# and process-exit tests (and the user-mistake cases) under them.
#
#   tools/asan.sh                  # the default test selection
#   tools/asan.sh core/tests/x.py  # other tests, any pytest arguments
#
# The sanitizer build lives in core/build/asan and leaves the workspace's own
# build alone; interpreters load it through tools/asan/sitecustomize.py. A
# Python host needs the sanitizer runtimes preloaded (it is not built with
# them). Leak detection is off: CPython and torch keep memory until exit by
# design. A finding stops the test process with a report on stderr.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/core/build/asan"
cd "$root"

uv sync --locked --quiet
python="$root/.venv/bin/python"
version="$("$python" -c 'import importlib.metadata as m; print(m.version("torchplug"))')"

sanitizers="-fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cmake -S core -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DPython_EXECUTABLE="$python" \
  -DSKBUILD_PROJECT_VERSION="$version" \
  -DCMAKE_CXX_FLAGS="$sanitizers" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" --parallel 2
# Laid out as in a wheel: the core loads its default driver (the sanitized
# simulator, so the driver's code is checked too) and its device kernels from
# the package folder, the parent of the torch-<release>/ folder of _C.
cmake --install "$build" --prefix "$build/package" >/dev/null
modules="$(echo "$build"/package/torch-*)"

if [ "$#" -eq 0 ]; then
  set -- core/tests/test_runtime_native.py core/tests/test_memory.py core/tests/test_streams.py \
    core/tests/test_ipc.py core/tests/test_process_exit.py core/tests/test_async_execution.py \
    tests/test_user_mistakes.py
fi

export SANITIZED_TORCHPLUG_BUILD="$modules"
export TORCHPLUG_RUNTIME_TEST_CXXFLAGS="$sanitizers"
export PYTHONPATH="$root/tools/asan${PYTHONPATH:+:$PYTHONPATH}"
export LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=1:detect_odr_violation=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
exec "$python" -m pytest -p no:cacheprovider -n 0 -q "$@"
