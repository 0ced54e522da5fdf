#include "util/lazy_libs.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

// The tables of cmake/lazy_stubs.py's generated file: weak, so that a program
// linked with the libraries themselves (no stubs) has none of them.
extern "C" {
__attribute__((weak)) extern void* exg_lazy_slots[];
__attribute__((weak)) extern const unsigned exg_lazy_count;
__attribute__((weak)) extern const unsigned char exg_lazy_lib_of[];
__attribute__((weak)) extern const unsigned exg_lazy_lib_count;
__attribute__((weak)) extern const char* const exg_lazy_names[];
__attribute__((weak)) extern const char* const exg_lazy_sonames[];
void* exg_lazy_resolve(unsigned index);
}

namespace exg {

namespace {

std::once_flag g_once;
std::string g_error;  // set once, under g_once

bool have_stubs() { return &exg_lazy_count != nullptr && exg_lazy_count > 0; }

void bind_all() {
  std::vector<void*> handles(exg_lazy_lib_count, nullptr);
  for (unsigned l = 0; l < exg_lazy_lib_count; ++l) {
    handles[l] = ::dlopen(exg_lazy_sonames[l], RTLD_NOW | RTLD_LOCAL);
    if (!handles[l]) {
      const char* why = ::dlerror();
      g_error = std::string("cannot load ") + exg_lazy_sonames[l] + ": " + (why ? why : "unknown error");
      return;
    }
  }
  std::vector<void*> fn(exg_lazy_count, nullptr);
  for (unsigned i = 0; i < exg_lazy_count; ++i) {
    fn[i] = ::dlsym(handles[exg_lazy_lib_of[i]], exg_lazy_names[i]);
    if (!fn[i]) {
      g_error = std::string("cannot load ") + exg_lazy_sonames[exg_lazy_lib_of[i]] + ": it has no " + exg_lazy_names[i];
      return;
    }
  }
  // Only a complete set is published: a stub either still binds or calls its function.
  for (unsigned i = 0; i < exg_lazy_count; ++i) __atomic_store_n(&exg_lazy_slots[i], fn[i], __ATOMIC_RELEASE);
}

}  // namespace

Result<void> load_shared_libs() {
  if (!have_stubs()) return {};
  std::call_once(g_once, bind_all);
  if (!g_error.empty()) return fail(Error::msg("shared libraries", g_error));
  return {};
}

}  // namespace exg

// A stub's first call (the binder in the generated file comes here): nothing
// can be returned to the caller but the function, so a library that cannot be
// loaded ends the process with the reason (load_shared_libs() is the clean way).
extern "C" void* exg_lazy_resolve(unsigned index) {
  if (auto r = exg::load_shared_libs(); !r) {
    std::fprintf(stderr, "exguardian: %s\n", r.error().str().c_str());
    ::_exit(125);
  }
  return __atomic_load_n(&exg_lazy_slots[index], __ATOMIC_ACQUIRE);
}
