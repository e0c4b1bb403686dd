/*
 * dma-probe.c — exercises the runtime's DMA (cop.h's cop_dma_*, docs/
 * coprocessor-abi.md "DMA") for sdk/tests/test_dma.py, one case per run:
 *
 *   dma-probe time          a get of 16, 4096 and 16384 bytes, each waited
 *                           for at once (time_one: the test reads its
 *                           cycles from the exact counts)
 *   dma-probe stale         a get and a put, read before and after the wait
 *   dma-probe tags          two tags complete one after the other
 *   dma-probe code          a get over a function, which is then called
 *   dma-probe bad-tag | bad-ls | bad-ea | misaligned | overflow
 *                           a bad transfer: the program must end with
 *                           "cop: dma: ..." and status 134
 */
#include "sdk/cop.h"

#include <string.h>

static uint32_t buffer[4096] __attribute__((aligned(16)));   /* 16 KiB */
static uint32_t second[4096] __attribute__((aligned(16)));

/* The function a DMA overwrites: 16 bytes at a 16-byte boundary. */
int dma_target(void);
__asm__(".section .text.dmatarget, \"ax\", @progbits\n"
        ".balign 16\n"
        ".globl dma_target\n"
        "dma_target:\n"
        "    li a0, 1\n"
        "    ret\n"
        "    nop\n"
        "    nop\n"
        ".previous\n");

/* li a0, 2; ret; nop; nop: what the DMA brings in. */
static const uint32_t new_code[4] = {
    0x00200513, 0x00008067, 0x00000013, 0x00000013,
};

static uint32_t *window(void)
{
    return cop_data_window(NULL);
}

__attribute__((noinline)) static void time_one(uint32_t size)
{
    cop_dma_get(buffer, window(), size, 5);
    cop_dma_wait_all(1u << 5);
}

static int run_time(void)
{
    time_one(16);
    time_one(4096);
    time_one(16384);
    return 0;
}

static int run_stale(void)
{
    uint32_t *ea = window();
    uint32_t before, after;

    ea[0] = 0xa11ce;
    buffer[0] = 0xb0b;
    cop_dma_get(buffer, ea, 16, 0);
    before = buffer[0];
    cop_dma_wait_all(1);
    after = buffer[0];
    cop_printf("get before=%lx after=%lx\n", (unsigned long)before,
               (unsigned long)after);
    buffer[4] = 0xc0de;
    cop_dma_put(&buffer[4], ea + 64, 16, 1);
    before = ea[64];
    cop_dma_wait_all(2);
    after = ea[64];
    cop_printf("put before=%lx after=%lx\n", (unsigned long)before,
               (unsigned long)after);
    return 0;
}

static int run_tags(void)
{
    uint32_t *ea = window();
    uint32_t first, status, last;

    ea[0] = 111;
    ea[4096] = 222;
    buffer[0] = 0;
    second[0] = 0;
    cop_dma_get(buffer, ea, 16384, 1);              /* tag 1 */
    cop_dma_get(second, ea + 4096, 16384, 2);       /* tag 2: the bus after */
    first = cop_dma_wait_any((1u << 1) | (1u << 2));
    status = cop_dma_status(1u << 2);
    cop_printf("any=%lx status=%lx first=%lu second=%lu\n",
               (unsigned long)first, (unsigned long)status,
               (unsigned long)buffer[0], (unsigned long)second[0]);
    last = cop_dma_wait_all(1u << 2);
    cop_printf("all=%lx second=%lu\n", (unsigned long)last,
               (unsigned long)second[0]);
    return 0;
}

static int run_code(void)
{
    uint32_t *ea = window();
    int before, stale, after;

    memcpy(ea, new_code, sizeof(new_code));
    before = dma_target();
    cop_dma_get((void *)dma_target, ea, 16, 3);
    stale = dma_target();
    cop_dma_wait_all(1u << 3);
    after = dma_target();
    cop_printf("code before=%d stale=%d after=%d\n", before, stale, after);
    return 0;
}

static int run_bad(const char *what)
{
    uint32_t *ea = window();
    size_t size;

    cop_data_window(&size);
    if (!strcmp(what, "bad-tag"))
        cop_dma_get(buffer, ea, 16, 32);
    else if (!strcmp(what, "bad-ls"))
        cop_dma_get((void *)(COP_LS_END - 16), ea, 32, 0);
    else if (!strcmp(what, "bad-ea"))
        cop_dma_get(buffer, (char *)ea + size - 16, 32, 0);
    else if (!strcmp(what, "misaligned"))
        cop_dma_get(buffer, ea, 20, 0);
    else if (!strcmp(what, "overflow"))
        for (unsigned i = 0; i <= COP_MFC_QUEUE_DEPTH; i++)
            cop_dma_get(&buffer[4 * i], ea, 16, 0);
    else
        return 2;
    cop_puts("not refused");
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    if (!strcmp(argv[1], "time"))
        return run_time();
    if (!strcmp(argv[1], "stale"))
        return run_stale();
    if (!strcmp(argv[1], "tags"))
        return run_tags();
    if (!strcmp(argv[1], "code"))
        return run_code();
    return run_bad(argv[1]);
}
