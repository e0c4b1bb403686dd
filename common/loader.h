/*
 * loader.h — start a coprocessor image under qemu-system-riscv32 (host side).
 *
 * The library behind cop-run, and the one copsim reuses.  Three steps:
 *
 *   1. cop_image_read() / cop_image_parse() (image.h) validate the image;
 *   2. cop_ram_create() makes the guest RAM file and maps it, and
 *      cop_ram_load() fills it: resident segments at their local-store
 *      addresses, the whole ELF file in the image window, the arguments in
 *      the boot block.  Overlay segments never go into the local store; the
 *      coprocessor's overlay manager fetches them from the image window;
 *   3. cop_qemu_command() builds the QEMU argv in a struct cop_argv, to
 *      which the caller appends what it needs (copsim: -plugin ...), and
 *      cop_qemu_spawn() / cop_qemu_wait() run it.
 *
 * The RAM file stays mapped, so the caller reads the local store (and the
 * overlay guard words) while and after the program runs, as the Cell kernel
 * read an SPU's local store.  docs/coprocessor-abi.md has the memory map.
 */
#ifndef COPROF_SDK_LOADER_H
#define COPROF_SDK_LOADER_H

#include "image.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define COP_RAM_PATH_MAX 4096

/* The guest RAM: COP_RAM_SIZE bytes of a file shared with QEMU. */
struct cop_ram {
    int fd;
    unsigned char *base;            /* guest address COP_RAM_BASE */
    char path[COP_RAM_PATH_MAX];    /* the path QEMU opens */
};

/*
 * Creates (or truncates) the RAM file at path, sized and zeroed, and maps
 * it.  With path NULL the file is an anonymous memfd that QEMU opens as
 * /proc/PID/fd/N of this process: nothing is left behind afterwards, but
 * only this process and its children can open it while it lives.
 */
int cop_ram_create(struct cop_ram *ram, const char *path,
                   struct cop_error *err);

/*
 * The same for a path that must not exist: it is created with O_EXCL (and
 * O_NOFOLLOW), so nothing already there, a symbolic link planted in a
 * directory others can write included, is opened or truncated.
 */
int cop_ram_create_new(struct cop_ram *ram, const char *path,
                       struct cop_error *err);

/*
 * The same for a file already opened (fd, taken over: cop_ram_close()
 * closes it), e.g. one a user named and safe_out_open() created: it is
 * sized and mapped, and QEMU opens it as /proc/PID/fd/N of this process,
 * never by its name again, so nothing swapped in at that name is used.
 */
int cop_ram_create_fd(struct cop_ram *ram, int fd, const char *label,
                      struct cop_error *err);

/* Maps an existing RAM file (of COP_RAM_SIZE bytes) to read it. */
int cop_ram_attach(struct cop_ram *ram, const char *path,
                   struct cop_error *err);

void cop_ram_close(struct cop_ram *ram);

/*
 * Places the image and the arguments argv[0..argc-1] (argv[0] is the
 * program's name) in the RAM: clears the local store and the boot block,
 * then writes resident segments, the image and the boot block.  The rest of
 * the image window is not touched (the program reads only image_size bytes
 * of it; a fresh RAM file stays sparse), nor is the data window, which is
 * the host's.
 */
int cop_ram_load(struct cop_ram *ram, const struct cop_image *image,
                 int argc, char *const argv[], struct cop_error *err);

/* The host address of len bytes at a guest address, or NULL if outside. */
void *cop_ram_at(const struct cop_ram *ram, uint32_t addr, size_t len);

/* Guard word of region (1-based) of image: the overlay loaded there. */
uint32_t cop_ram_guard_word(const struct cop_ram *ram,
                            const struct cop_image *image, uint32_t region);

/* A growable, always NULL-terminated argument vector. */
struct cop_argv {
    char **argv;
    size_t argc;
    size_t capacity;
};

void cop_argv_init(struct cop_argv *v);
int cop_argv_add(struct cop_argv *v, const char *arg);
int cop_argv_addf(struct cop_argv *v, const char *format, ...)
    __attribute__((format(printf, 2, 3)));
void cop_argv_free(struct cop_argv *v);

#define COP_QEMU_PROGRAM "qemu-system-riscv32"
#define COP_QEMU_PACKAGE "qemu-system-misc"
#define COP_QEMU_CONSOLE "stdio,signal=off"

struct cop_qemu_options {
    const char *program;    /* NULL: COP_QEMU_PROGRAM, looked up in PATH */
    const char *ram_path;   /* cop_ram.path */
    const char *console;    /* -chardev backend for the UART; NULL: stdio */
};

/*
 * Appends the QEMU command line that runs the RAM file's program (see
 * docs/coprocessor-abi.md); the caller may append more arguments.
 */
int cop_qemu_command(struct cop_argv *v,
                     const struct cop_qemu_options *options);

/*
 * Starts the command with stdin from /dev/null and stdout on console_fd (-1:
 * this process's stdout).  The child gets SIGKILL when the thread that
 * spawned it dies.  Returns 0, or -1 with errno and err set (ENOENT: the
 * program is not installed; the message names its Debian package).
 */
int cop_qemu_spawn(const struct cop_argv *command, int console_fd, pid_t *pid,
                   struct cop_error *err);

/* The same with standard error on error_fd (-1: this process's), so that a
 * caller such as copsim can report what QEMU or its plugin said. */
int cop_qemu_spawn_io(const struct cop_argv *command, int console_fd,
                      int error_fd, pid_t *pid, struct cop_error *err);

/* The same with standard input from input_fd (-1: /dev/null): copsim's
 * slot emulators read the ring that interrupts their stub there. */
int cop_qemu_spawn_fds(const struct cop_argv *command, int input_fd,
                       int console_fd, int error_fd, pid_t *pid,
                       struct cop_error *err);

/*
 * Waits for the child.  Returns 0 with *status its exit status, 1 with
 * *status 128 + signal and err set when a signal killed it, -1 on error.
 */
int cop_qemu_wait(pid_t pid, int *status, struct cop_error *err);

#endif
