// Added to every extension built with torchplug_add_extension on x86-64
// Linux (see manylinux_compat.h). libstdc++'s headers (GCC 11 and later) read
// glibc's __libc_single_threaded, new in glibc 2.32, to skip atomic reference
// counting in single-threaded processes. This module-local definition keeps
// the extension loadable on older glibc; it says "multi-threaded" always, so
// reference counts stay atomic, which is what a process that imported torch
// needs anyway.
#include <cstddef>

#if defined(__GLIBC__)
extern "C" {
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
}
#endif
