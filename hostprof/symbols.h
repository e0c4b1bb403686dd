/*
 * symbols.h — host addresses named with elfutils (libdwfl), after the
 * processes that ran them ended.
 *
 * Each process's executable mappings come from the sampler's mmap records
 * (a forked child that did not exec uses its parent's).  For each process
 * a Dwfl reports every mapped file at its load bias, so executables and
 * shared libraries, PIE or not, are found; separate debug information is
 * found by build-id (/usr/lib/debug/.build-id) by dwfl_standard_find_-
 * debuginfo.  An address is named by its ELF file, the file's build-id,
 * the symbol covering it (dwfl_module_addrinfo) and its offset in it, and,
 * where DWARF is present, the innermost inlined function at it and its
 * source line.  Addresses no mapping covers are "[unknown]"; a mapping
 * with no file ([vdso], anonymous JIT code) names itself.
 */
#ifndef COPROF_HOSTPROF_SYMBOLS_H
#define COPROF_HOSTPROF_SYMBOLS_H

#include "hostprof/hostprof.h"

/* Sets every sample's location and fills hp->locations; callchain
 * addresses get theirs in *chain_locations (hp->chain.n ints, malloc'd).
 * 0, or -1 when out of memory. */
int host_symbolize(struct hostprof *hp, int **chain_locations);

#endif
