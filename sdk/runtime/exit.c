/*
 * exit.c — ending the program: exit status, fatal errors, traps.
 *
 * The virt machine's sifive_test device ends QEMU: writing COP_TEST_PASS
 * exits with status 0, writing status << 16 | COP_TEST_FAIL exits with that
 * status.  _exit and abort are here too, so that picolibc's exit() and a
 * program's abort() end the emulator the same way.
 */
#include "sdk/cop.h"

#include <stdlib.h>
#include <unistd.h>

_Noreturn void __cop_trap(unsigned cause, uintptr_t epc, unsigned tval);

void cop_exit(int status)
{
    volatile uint32_t *test = (volatile uint32_t *)(uintptr_t)COP_TEST_BASE;
    uint32_t code = (unsigned)status & 0xffu;

    *test = code == 0 ? COP_TEST_PASS : code << 16 | COP_TEST_FAIL;
    for (;;)
        ;
}

void _exit(int status)
{
    cop_exit(status);
}

void cop_fatal(const char *format, ...)
{
    va_list args;

    cop_printf("cop: ");
    va_start(args, format);
    cop_vprintf(format, args);
    va_end(args);
    cop_putchar('\n');
    cop_exit(COP_STATUS_FATAL);
}

void abort(void)
{
    cop_fatal("abort() called");
}

static const char *trap_name(unsigned cause)
{
    static const char *const names[] = {
        "misaligned instruction address", "instruction access fault",
        "illegal instruction", "breakpoint", "misaligned load address",
        "load access fault", "misaligned store address", "store access fault",
        "ecall from user mode", "ecall from supervisor mode", "reserved",
        "ecall from machine mode",
    };

    if (cause & 0x80000000u)
        return "interrupt";
    if (cause < sizeof(names) / sizeof(names[0]))
        return names[cause];
    return "unknown trap";
}

void __cop_trap(unsigned cause, uintptr_t epc, unsigned tval)
{
    cop_printf("cop: trap: %s at %p (mcause %u, mtval 0x%08x)\n",
               trap_name(cause), (void *)epc, cause & 0x7fffffffu, tval);
    cop_exit(COP_STATUS_TRAP);
}
