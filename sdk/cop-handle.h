/*
 * cop-handle.h — the program handle of a coprocessor image embedded in a
 * host program (the counterpart of the Cell SDK's spe_program_handle_t).
 *
 * `cop-embed IMAGE NAME OUT.o` writes an x86-64 object that defines
 *
 *     const cop_program_handle_t NAME;
 *
 * whose elf_image points at a copy of IMAGE's bytes, 128-byte aligned in
 * read-only data.  A host program declares it as
 *
 *     extern const cop_program_handle_t NAME;
 *
 * and hands &NAME to libcop.  The object-id of a context that runs it is
 * the address elf_image (emulator/copsim/README.md, "Contexts": copsim
 * finds the file and offset through the host's /proc/PID/maps).
 */
#ifndef COPROF_COP_HANDLE_H
#define COPROF_COP_HANDLE_H

#include <stdint.h>

#define COP_IMAGE_ALIGN 128

typedef struct cop_program_handle {
    uint32_t handle_size;       /* sizeof(cop_program_handle_t) at embed time */
    uint32_t image_size;        /* bytes at elf_image */
    const void *elf_image;      /* the ELF image, COP_IMAGE_ALIGN aligned */
    const char *name;           /* short name: the image's note, else NAME */
} cop_program_handle_t;

#endif
