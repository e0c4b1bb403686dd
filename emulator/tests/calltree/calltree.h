/*
 * calltree.h — the functions of the calltree test program: a known call
 * tree for the trace unit's call stacks (emulator/tests/test_call_stacks.py
 * and report/tests/test_callgraph.py).
 */
#ifndef COPROF_EMULATOR_TESTS_CALLTREE_H
#define COPROF_EMULATOR_TESTS_CALLTREE_H

#include <stdint.h>

/* resident (calltree.c) */
uint32_t hot_b(uint32_t n);

/* overlay "ping", region 1 */
uint32_t ping(uint32_t n);

/* overlay "pong", region 1: replaces ping while it runs */
uint32_t pong(uint32_t n);

#endif
