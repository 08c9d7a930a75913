// The pause a polling loop takes between two looks at shared memory: it
// tells the core (and a hyperthread sibling) that this is a spin.
#pragma once

namespace chorus {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace chorus
