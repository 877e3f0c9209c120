// Force-included into every source of an extension built with
// torchplug_add_extension on x86-64 Linux, so that the module runs on the
// same systems as torch's own wheels (manylinux_2_28: glibc 2.28 and the
// libstdc++ of GCC 8). A newer toolchain binds a few calls to symbol versions
// that exist only on newer systems; these lines bind them to the older
// versions of the same functions, which newer glibc and libstdc++ keep for
// compatibility. `auditwheel show` on the wheel verifies the result.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && defined(__cplusplus)
#include <cstddef>  // defines __GLIBC__ (through <features.h>) and _GLIBCXX_RELEASE

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
// glibc 2.34 moved libpthread into libc under new versions; std::call_once calls this one.
__asm__(".symver pthread_once,pthread_once@GLIBC_2.2.5");
// It moved libdl too: the core's driver loader calls these (older systems
// have them in libdl.so.2, which the core links for that).
__asm__(".symver dlopen,dlopen@GLIBC_2.2.5");
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
__asm__(".symver dlerror,dlerror@GLIBC_2.2.5");
__asm__(".symver dladdr,dladdr@GLIBC_2.2.5");
__asm__(".symver dlclose,dlclose@GLIBC_2.2.5");
#endif

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 29))
// glibc 2.29 gave these faster versions; the old ones compute the same
// results and also set errno.
__asm__(".symver exp,exp@GLIBC_2.2.5");
__asm__(".symver log,log@GLIBC_2.2.5");
__asm__(".symver pow,pow@GLIBC_2.2.5");
__asm__(".symver exp2,exp2@GLIBC_2.2.5");
__asm__(".symver log2,log2@GLIBC_2.2.5");
#endif

#if defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 12
// GCC 12 gave condition_variable::wait a new version (it may now be cancelled
// by pthread_cancel, which no torchplug extension does).
__asm__(
    ".symver _ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE,"
    "_ZNSt18condition_variable4waitERSt11unique_lockISt5mutexE@GLIBCXX_3.4.11");
#endif
#endif
