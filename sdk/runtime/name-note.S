/*
 * name-note.S — the image's short name as an ELF note (the counterpart of
 * the SPU's .note.spu_name): owner "COPNAME", type NT_COP_NAME (1), the
 * NUL-terminated name as descriptor.  cop.mk assembles it once per program
 * with -DCOP_NAME_STRING='"NAME"'.  __cop_program_name labels the string,
 * which cop.ld places in the local store, so cop_program_name() returns it.
 */
    .section .note.cop_name, "a", @note
    .balign 4
    .4byte  2f - 1f             /* namesz */
    .4byte  4f - 3f             /* descsz */
    .4byte  1                   /* NT_COP_NAME */
1:  .asciz  "COPNAME"
2:  .balign 4
    .globl __cop_program_name
    .type __cop_program_name, @object
3:
__cop_program_name:
    .asciz  COP_NAME_STRING
4:  .balign 4
    .size __cop_program_name, 4b - 3b
