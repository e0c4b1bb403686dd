/*
 * slot-crt0.S — start-up for the test guests (emulator/tests/guest/) when
 * they run as contexts of a slot stub: the same as their own crt0, except
 * that the exit is an ecall with main's status in a0, which the stub takes
 * as the context's end (slot-stub.S), instead of the virt test device,
 * which would end the slot's emulator.
 */
    .section .text.start, "ax"
    .globl _start
_start:
    la      sp, __stack_top
    call    main
    .globl guest_exit
guest_exit:
    ecall
1:  j       1b
