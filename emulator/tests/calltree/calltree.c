/*
 * calltree.c — a coprocessor program with a known call tree, for the
 * trace unit's call stacks and copreport's call graph.
 *
 *   calltree [ROUNDS]
 *
 * main calls, ROUNDS times (default 40):
 *   a -> hot_b(3 * K)          hot_b's work through a is three times ...
 *   c -> hot_b(K)              ... its work through c
 *   e => d                     e tail-calls d (e leaves no frame)
 *   fib(9)                     recursion, two calls per level
 *   ping -> pong -> hot_b      overlays of one region: pong replaces its
 *                              caller, which returns through the manager
 *   jump(6)                    six frames deep, then longjmp back to main
 *
 * All work loops cost the same per iteration, so the inclusive shares are
 * known from the iteration counts (the tests take the exact ones from a
 * capture at every instruction).
 */
#include "sdk/cop.h"
#include "emulator/tests/calltree/calltree.h"

#include <setjmp.h>
#include <stdlib.h>

#define K 400u

static volatile uint32_t sink;
static jmp_buf unwind;

uint32_t __attribute__((noinline)) hot_b(uint32_t n)
{
    uint32_t x = n;

    for (uint32_t i = 0; i < n; i++)
        x = x * 1103515245u + 12345u;
    sink = x;
    return x;
}

static uint32_t __attribute__((noinline)) a(uint32_t n)
{
    return hot_b(3 * n) + 1;
}

static uint32_t __attribute__((noinline)) c(uint32_t n)
{
    return hot_b(n) + 2;
}

static uint32_t __attribute__((noinline)) d(uint32_t n)
{
    uint32_t x = n;

    for (uint32_t i = 0; i < n; i++)
        x = x * 69069u + 1u;
    sink = x;
    return x;
}

/* Ends in a tail call: jumps to d, which returns straight to main. */
static uint32_t __attribute__((noinline)) e(uint32_t n)
{
    sink = n;
    return d(n);
}

static uint32_t __attribute__((noinline)) fib(uint32_t n)
{
    if (n < 2) {
        sink = n;
        return n;
    }
    return fib(n - 1) + fib(n - 2);
}

static void __attribute__((noinline)) jump(uint32_t depth)
{
    if (depth > 64)
        return;
    if (depth == 0) {
        hot_b(K / 4);
        longjmp(unwind, 1);
    }
    jump(depth - 1);
    sink = depth;           /* never reached: not a tail call */
}

int main(int argc, char **argv)
{
    uint32_t rounds = argc > 1 ? (uint32_t)atoi(argv[1]) : 40;
    uint32_t total = 0;

    for (uint32_t r = 0; r < rounds; r++) {
        total += a(K);
        total += c(K);
        total += e(K);
        total += fib(9);
        total += ping(K / 4);
        if (!setjmp(unwind))
            jump(6);
    }
    cop_printf("calltree=%u\n", (unsigned)total);
    return 0;
}
