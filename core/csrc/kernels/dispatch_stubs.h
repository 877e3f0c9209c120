#pragma once
// Calling one of ATen's DispatchStubs from outside libtorch links against the
// overload that takes one kernel pointer per CPU capability libtorch was built
// with; on x86-64 that is AVX2 and AVX-512, declared only under these macros.
// Include this before any ATen header in a file that calls a stub.
#if defined(__x86_64__) || defined(_M_X64)
#define HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
