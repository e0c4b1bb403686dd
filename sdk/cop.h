/*
 * cop.h — the coprocessor runtime, for programs built with sdk/cop.mk.
 *
 * A program defines main(int argc, char **argv) (or main(void)); crt0 calls
 * it with the arguments of the boot block and passes its return value to
 * cop_exit().
 * The console is the virt UART, the exit status goes through the virt test
 * device and becomes the emulator's.  picolibc supplies <string.h>,
 * <stdlib.h> (atoi, strtoul, ...) and the like; exit() and abort() work too.
 * docs/coprocessor-abi.md is the ABI behind these functions.
 * The ABI is ilp32: uint32_t is unsigned long and int32_t long, so
 * cop_printf takes them with %lu and %ld.
 */
#ifndef COPROF_SDK_COP_H
#define COPROF_SDK_COP_H

#include "abi/cop-abi.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* Console output. cop_puts appends a newline, as puts does. */
void cop_putchar(int c);
int cop_puts(const char *s);

/*
 * printf for the console: %d %i %u %x %X %c %s %p %%, the flags '-' and
 * '0', a width (or '*'), and the sizes 'l', 'll' and 'z'.  Returns the
 * number of characters written.
 */
int cop_printf(const char *format, ...) __attribute__((format(printf, 1, 2)));
int cop_vprintf(const char *format, va_list args);

/* Ends the program: the emulator exits with status & 0xff. */
_Noreturn void cop_exit(int status);

/* Prints "cop: MESSAGE" and exits with COP_STATUS_FATAL. */
_Noreturn void cop_fatal(const char *format, ...)
    __attribute__((format(printf, 1, 2)));

/* The data window shared with the host program, and its size. */
void *cop_data_window(size_t *size);

/* The ELF image in main memory, and its size. */
const void *cop_image_window(size_t *size);

/* The image's short name, from its note ("" without one). */
const char *cop_program_name(void);

/* The index of the overlay loaded in region (1-based), 0 for none. */
unsigned cop_overlay_loaded(unsigned region);

/* How many times the overlay manager has copied an overlay in. */
unsigned long cop_overlay_load_count(void);

#endif
