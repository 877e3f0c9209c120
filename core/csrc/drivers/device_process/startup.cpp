// The device program's entry point on x86-64 Linux, in place of glibc's
// crt1.o (the build links it with -nostartfiles). The crt1.o of glibc 2.34
// and later calls __libc_start_main@GLIBC_2.34, which would make the program
// need a newer glibc than the manylinux_2_28 wheels it ships in promise; this
// one calls the version every glibc since 2.2.5 exports, passing the
// constructor runner older glibc expects (newer glibc calls it as it would
// call a legacy program's).
#include <cstddef>

extern "C" {

// Provided by the linker for executables.
extern void (*__init_array_start[])(int, char**, char**) __attribute__((visibility("hidden")));
extern void (*__init_array_end[])(int, char**, char**) __attribute__((visibility("hidden")));

// What crtbegin.o would define: the handle static destructors register under.
__attribute__((visibility("hidden"))) void* __dso_handle = &__dso_handle;

// Runs the program's constructors, as glibc's __libc_csu_init did (the
// dynamic linker runs the preinit array of dynamically linked programs itself).
__attribute__((visibility("hidden"), used)) void torchplug_device_constructors(int argc, char** argv, char** envp) {
  const size_t count = static_cast<size_t>(__init_array_end - __init_array_start);
  for (size_t index = 0; index < count; ++index) {
    __init_array_start[index](argc, argv, envp);
  }
}

}  // extern "C"

// The System V entry point: the stack holds argc, argv, envp; %rdx the
// dynamic linker's finaliser. __libc_start_main(main, argc, argv, init, fini,
// rtld_fini, stack_end) never returns.
__asm__(R"(
  .symver __libc_start_main, __libc_start_main@GLIBC_2.2.5
  .text
  .globl _start
  .type _start, @function
_start:
  xor %ebp, %ebp
  mov %rdx, %r9
  pop %rsi
  mov %rsp, %rdx
  and $-16, %rsp
  push %rax
  push %rsp
  xor %r8d, %r8d
  lea torchplug_device_constructors(%rip), %rcx
  lea main(%rip), %rdi
  call __libc_start_main@PLT
  hlt
  .size _start, . - _start
)");
