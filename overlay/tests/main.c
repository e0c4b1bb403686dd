/*
 * main.c — the resident code of overlay/'s test image.  It is linked, never
 * run: the tests only resolve addresses in it.  _start is an assembly label
 * without a size; the rest are C functions of different sizes.
 */
int ovl1_a_square(int x);
int ovl1_b_checksum(const unsigned char *bytes, int length);
int ovl1_c_fold(int x);
int ovl2_a_count(int x);
int ovl2_b_mix(int x, int y);

static int counters[64];                       /* .bss: no file bytes */
int frame_words[16] = { 1 };                   /* .data */
int seed = 7;                                   /* .data */

/* The image's short name, as the SDK's name note carries it. */
__asm__(".section .note.cop_name, \"a\", @note\n"
        ".balign 4\n"
        ".word 8, 12, 1\n"              /* namesz, descsz, NT_COP_NAME */
        ".asciz \"COPNAME\"\n"
        ".asciz \"ovl-test.1\"\n"
        ".balign 4\n");

__asm__(".section .text.start, \"ax\"\n"
        ".globl _start\n"
        "_start:\n"
        "    la sp, __stack_top\n"
        "    call main\n"
        "1:  j 1b\n");

static int __attribute__((noinline)) bump(int slot)
{
    counters[slot & 63] += seed;
    return counters[slot & 63];
}

int main(void)
{
    int total = 0;

    for (int i = 0; i < 100; i++) {
        total += ovl1_a_square(i) + ovl1_c_fold(total);
        total ^= ovl1_b_checksum((const unsigned char *)frame_words,
                                 (int)sizeof frame_words);
        total += ovl2_a_count(i) + ovl2_b_mix(total, i);
        total += bump(i);
    }
    frame_words[0] = total;
    return 0;
}
