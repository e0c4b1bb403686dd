/*
 * start.c — from the boot block to main, and the windows it describes.
 *
 * The loader fills the boot block at COP_BOOT_BASE before the program
 * starts (docs/coprocessor-abi.md): where the image and the data window are
 * in main memory, and argc/argv.  __cop_start checks it, marks it started
 * (so that the runner can tell a QEMU that never ran the program from a
 * program that exited), sets up the DMA channel (mfc.c) and runs main.
 */
#include "sdk/cop.h"

#include <stddef.h>

extern const char __cop_program_name[] __attribute__((weak));

static const struct cop_boot_block *boot_block(void)
{
    return (const struct cop_boot_block *)(uintptr_t)COP_BOOT_BASE;
}

int main(int argc, char **argv);
void __cop_start(void);
void __cop_mfc_init(void);

void __cop_start(void)
{
    const struct cop_boot_block *boot = boot_block();

    if (boot->magic != COP_BOOT_MAGIC || boot->version != COP_BOOT_VERSION)
        cop_fatal("no boot block at 0x%08x: start the program with cop-run "
                  "or copsim", COP_BOOT_BASE);
    ((volatile struct cop_boot_block *)boot)->started = COP_BOOT_STARTED;
    __cop_mfc_init();
    cop_exit(main((int)boot->argc, (char **)(uintptr_t)boot->argv_addr));
}

void *cop_data_window(size_t *size)
{
    if (size)
        *size = boot_block()->data_size;
    return (void *)(uintptr_t)boot_block()->data_addr;
}

const void *cop_image_window(size_t *size)
{
    if (size)
        *size = boot_block()->image_size;
    return (const void *)(uintptr_t)boot_block()->image_addr;
}

const char *cop_program_name(void)
{
    return __cop_program_name ? __cop_program_name : "";
}
