/*
 * runtime-probe.c — a coprocessor program that exercises one piece of the
 * runtime per command, for sdk/tests/test_runtime.py.
 *
 *   args ...          print argc and every argv[i]
 *   printf            print a fixed set of cop_printf conversions
 *   return N          return N from main
 *   exit N            cop_exit(N)
 *   libc-exit N       picolibc's exit(N), which ends through _exit
 *   abort             abort()
 *   illegal           execute an illegal instruction
 *   compressed        execute a compressed instruction (c.nop), which the
 *                     ABI forbids and the emulated CPU does not have
 *   fault             load from address 0, where nothing is mapped
 *   windows           print the boot block's windows and the image's name
 *   fill-data N       write N words i * 0x01010101 to the data window
 *   no-boot-block     wipe the boot block magic and start again
 *   errno             errno-setting libc calls (strtol, strtoul overflow)
 *                     and thread-local variables, initialised and not:
 *                     picolibc's errno is thread-local, reached through tp
 */
#include "sdk/cop.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static __thread int tls_initialised = 7;        /* .tdata */
static __thread int tls_zeroed;                 /* .tbss */

static int print_args(int argc, char **argv)
{
    cop_printf("argc=%d\n", argc);
    for (int i = 0; i < argc; i++)
        cop_printf("argv[%d]=%s\n", i, argv[i]);
    return argv[argc] == NULL ? 0 : 1;
}

static int print_conversions(void)
{
    cop_printf("[%d] [%i] [%u] [%x] [%X]\n", -42, 7, 4000000000u, 0xbeefu,
               0xbeefu);
    cop_printf("[%5d] [%-5d] [%05d] [%05d]\n", 42, 42, 42, -42);
    cop_printf("[%ld] [%lu] [%lld] [%llu] [%llx]\n", -123456789L, 123456789UL,
               -1234567890123LL, 18446744073709551615ULL, 0x123456789abcULL);
    cop_printf("[%c] [%3c] [%s] [%6s] [%-6s] [%zu]\n", 'x', 'y', "abc", "abc",
               "abc", sizeof(struct cop_boot_block));
    cop_printf("[%p] [%*d] [%-*d] [%%]\n", (void *)0x80001000u, 4, 9, 3, 5);
    cop_puts("puts line");
    return 0;
}

static int print_windows(void)
{
    size_t data_size, image_size;
    void *data = cop_data_window(&data_size);
    const unsigned char *image = cop_image_window(&image_size);

    cop_printf("name=%s\n", cop_program_name());
    cop_printf("data=%p size=%zu\n", data, data_size);
    cop_printf("image=%p size=%zu magic=%s\n", (const void *)image, image_size,
               memcmp(image, "\177ELF", 4) == 0 ? "ELF" : "bad");
    return 0;
}

static int fill_data(int words)
{
    size_t size;
    volatile uint32_t *data = cop_data_window(&size);

    if ((size_t)words > size / 4)
        return 2;
    for (int i = 0; i < words; i++)
        data[i] = (uint32_t)i * 0x01010101u;
    return 0;
}

static const char *errno_name(void)
{
    return errno == ERANGE ? "ERANGE" : errno == 0 ? "0" : "other";
}

static int check_errno(void)
{
    uintptr_t where = (uintptr_t)&errno;
    long value;
    unsigned long unsigned_value;

    errno = 0;
    value = strtol("99999999999999999999", NULL, 10);
    cop_printf("strtol=%ld errno=%s\n", value, errno_name());
    errno = 0;
    unsigned_value = strtoul("4294967296", NULL, 10);
    cop_printf("strtoul=%lu errno=%s\n", unsigned_value, errno_name());
    errno = 0;
    value = strtol("-12", NULL, 10);
    cop_printf("strtol=%ld errno=%s\n", value, errno_name());
    cop_printf("errno in the local store: %s\n",
               where >= COP_LS_BASE && where < COP_LS_END ? "yes" : "no");
    tls_zeroed += tls_initialised;
    cop_printf("tdata=%d tbss=%d\n", tls_initialised, tls_zeroed);
    return 0;
}

static void illegal_instruction(void)
{
    __asm__ volatile(".4byte 0x00000000");
}

static void compressed_instruction(void)
{
    __asm__ volatile(".2byte 0x0001\n.2byte 0x0001");
}

static int load_from_nowhere(void)
{
    volatile uintptr_t nowhere = 0x4;

    return *(volatile int *)nowhere;
}

static void restart_without_boot_block(void)
{
    extern void _start(void);

    *(volatile uint32_t *)(uintptr_t)COP_BOOT_BASE = 0;
    _start();
}

int main(int argc, char **argv)
{
    const char *command = argc > 1 ? argv[1] : "";
    int number = argc > 2 ? atoi(argv[2]) : 0;

    if (strcmp(command, "args") == 0)
        return print_args(argc, argv);
    if (strcmp(command, "printf") == 0)
        return print_conversions();
    if (strcmp(command, "return") == 0)
        return number;
    if (strcmp(command, "exit") == 0)
        cop_exit(number);
    if (strcmp(command, "libc-exit") == 0)
        exit(number);
    if (strcmp(command, "abort") == 0)
        abort();
    if (strcmp(command, "illegal") == 0)
        illegal_instruction();
    if (strcmp(command, "compressed") == 0)
        compressed_instruction();
    if (strcmp(command, "fault") == 0)
        return load_from_nowhere();
    if (strcmp(command, "windows") == 0)
        return print_windows();
    if (strcmp(command, "fill-data") == 0)
        return fill_data(number);
    if (strcmp(command, "no-boot-block") == 0)
        restart_without_boot_block();
    if (strcmp(command, "errno") == 0)
        return check_errno();
    cop_printf("runtime-probe: unknown command '%s'\n", command);
    return 64;
}
