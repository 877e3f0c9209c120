// Keeps the driver to the libstdc++ of manylinux_2_28 (GLIBCXX_3.4.24,
// CXXABI_1.3.11), as manylinux_compat.h does for glibc (x86-64 Linux builds
// only, like it). GCC 11 and later headers inline code that calls three
// functions libstdc++ exports only under newer versions. The extensions bind
// them to the copies torch's libraries export; the driver, linking no torch,
// defines them here over functions that old libstdc++ exports too.
//
// These definitions must stay internal (the version script exports
// TPD_GetApi alone): libstdc++'s own copy constructor calls _M_addref through
// the dynamic symbol table, so an exported _M_addref here would call itself.
#include <cstddef>  // defines _GLIBCXX_RELEASE

#if defined(__GLIBCXX__) && defined(_GLIBCXX_RELEASE) && _GLIBCXX_RELEASE >= 11
#include <exception>
#include <new>

// exception_ptr's out-of-line copy constructor and destructor of CXXABI_1.3.3,
// which count the references that _M_addref and _M_release count now.
extern "C" void torchplug_exception_ptr_copy(void* self, const void* other) noexcept;
extern "C" void torchplug_exception_ptr_destroy(void* self) noexcept;
__asm__(".symver torchplug_exception_ptr_copy,_ZNSt15__exception_ptr13exception_ptrC1ERKS0_@CXXABI_1.3.3");
__asm__(".symver torchplug_exception_ptr_destroy,_ZNSt15__exception_ptr13exception_ptrD1Ev@CXXABI_1.3.3");

namespace std {

void __exception_ptr::exception_ptr::_M_addref() noexcept {
  // A copy that is never destroyed holds the added reference.
  alignas(exception_ptr) unsigned char copy[sizeof(exception_ptr)];
  torchplug_exception_ptr_copy(copy, this);
}

void __exception_ptr::exception_ptr::_M_release() noexcept { torchplug_exception_ptr_destroy(this); }

void __throw_bad_array_new_length() { throw bad_array_new_length(); }

}  // namespace std
#endif
