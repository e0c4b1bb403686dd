/* SPDX-License-Identifier: GPL-2.0 */
/*
 * stdint.h - the fixed-width names for the module build.
 *
 * The trace unit's register primitives (emulator/trace-regs.h) are
 * freestanding C that includes <stdint.h>.  Kbuild compiles with
 * -nostdinc, so this directory, first on the module's include path, maps
 * the header to the kernel's own definitions of uint32_t and friends.
 */
#ifndef COPROF_LINUX_STDINT_H
#define COPROF_LINUX_STDINT_H

#include <linux/types.h>

#endif /* COPROF_LINUX_STDINT_H */
