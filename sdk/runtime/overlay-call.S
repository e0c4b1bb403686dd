/*
 * overlay-call.S — the overlay manager's call and return trampolines.
 *
 * Every global function F of an overlay has a resident stub __wrap_F
 * (written by cop-overlays stubs; ld --wrap sends other objects' calls to
 * it):
 *
 *     __wrap_F:  li t0, INDEX       the overlay that holds F
 *                la t1, __real_F    F itself
 *                j  __cop_overlay_call
 *
 * __cop_overlay_call keeps F's arguments (a0-a7) while __cop_overlay_enter
 * (overlay.c) loads the overlay, then jumps to F.  F returns either to its
 * caller directly, or, when the caller runs in an overlay region itself,
 * through __cop_overlay_return, which lets __cop_overlay_leave put the
 * caller's overlay back before returning to it.  Return values (a0, a1)
 * are kept across that.
 */
    .text
    .balign 4
    .globl __cop_overlay_call
    .type __cop_overlay_call, @function
__cop_overlay_call:
    addi    sp, sp, -48
    sw      t1, 0(sp)
    sw      a0, 4(sp)
    sw      a1, 8(sp)
    sw      a2, 12(sp)
    sw      a3, 16(sp)
    sw      a4, 20(sp)
    sw      a5, 24(sp)
    sw      a6, 28(sp)
    sw      a7, 32(sp)
    mv      a0, t0              /* overlay index */
    mv      a1, t1              /* target */
    mv      a2, ra              /* the caller's return address */
    call    __cop_overlay_enter /* returns where the target must return */
    mv      ra, a0
    lw      t1, 0(sp)
    lw      a0, 4(sp)
    lw      a1, 8(sp)
    lw      a2, 12(sp)
    lw      a3, 16(sp)
    lw      a4, 20(sp)
    lw      a5, 24(sp)
    lw      a6, 28(sp)
    lw      a7, 32(sp)
    addi    sp, sp, 48
    jr      t1
    .size __cop_overlay_call, . - __cop_overlay_call

    .balign 4
    .globl __cop_overlay_return
    .type __cop_overlay_return, @function
__cop_overlay_return:
    addi    sp, sp, -16
    sw      a0, 0(sp)
    sw      a1, 4(sp)
    call    __cop_overlay_leave /* reloads the caller's overlay */
    mv      ra, a0
    lw      a0, 0(sp)
    lw      a1, 4(sp)
    addi    sp, sp, 16
    ret
    .size __cop_overlay_return, . - __cop_overlay_return
