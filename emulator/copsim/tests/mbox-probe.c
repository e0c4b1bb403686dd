/*
 * mbox-probe.c — exercises the mailboxes (cop.h's cop_mbox_*, docs/
 * coprocessor-abi.md "Mailboxes") for test_mailbox.py, run by mbox-host,
 * one case per run:
 *
 *   mbox-probe pingpong N   N times: writes i, reads the host's answer,
 *                           which must be 3 * i + 1
 *   mbox-probe order        waits a while, then prints the count of
 *                           arrived messages and the 4 messages it reads
 *   mbox-probe full         writes 111 then 222 into the 1-deep outbound
 *                           mailbox (the second write waits for the host)
 *   mbox-probe read         reads one message and prints it
 */
#include "sdk/cop.h"

#include <stdlib.h>
#include <string.h>

static int pingpong(unsigned rounds)
{
    unsigned bad = 0;

    for (unsigned i = 0; i < rounds; i++) {
        cop_mbox_write(i);
        bad += cop_mbox_read() != 3 * i + 1;
    }
    cop_printf("pingpong rounds=%u bad=%u\n", rounds, bad);
    return bad != 0;
}

static int order(void)
{
    volatile unsigned spin = 0;
    uint32_t got[4];
    unsigned before;

    while (spin < 2000)     /* well past mailbox.host_latency */
        spin = spin + 1;
    before = cop_mbox_count();
    for (int i = 0; i < 4; i++)
        got[i] = cop_mbox_read();
    cop_printf("count=%u got=%lu,%lu,%lu,%lu after=%u\n", before,
               (unsigned long)got[0], (unsigned long)got[1],
               (unsigned long)got[2], (unsigned long)got[3],
               cop_mbox_count());
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "pingpong"))
        return pingpong((unsigned)atoi(argv[2]));
    if (argc == 2 && !strcmp(argv[1], "order"))
        return order();
    if (argc == 2 && !strcmp(argv[1], "full")) {
        cop_mbox_write(111);
        cop_mbox_write(222);
        cop_printf("wrote both\n");
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "read")) {
        cop_printf("read %lu\n", (unsigned long)cop_mbox_read());
        return 0;
    }
    cop_printf("usage: mbox-probe pingpong N | order | full | read\n");
    return 2;
}
