/*
 * driver-linux.h — driver.c's requests for `--driver=linux`, answered by
 * copdrv.ko in a guest (driver-linux.c); driver.c dispatches to them.
 * Each returns 0, or -1 with one line in err and errno set.
 */
#ifndef COPROF_CONTROL_DRIVER_LINUX_H
#define COPROF_CONTROL_DRIVER_LINUX_H

#include "control/driver.h"

/* GET as the copsim driver answers it (driver.c), for the check that
 * copsim hosts none. */
int driver_hosted_get(struct driver *d, struct copdrv_control_reply *reply,
                      char *err, size_t errlen);

int driver_linux_get(struct driver *d, struct copdrv_control_reply *reply,
                     char *err, size_t errlen);
int driver_linux_start(struct driver *d, int *stream_fd, char *err,
                       size_t errlen);
int driver_linux_stats(struct driver *d, struct copdrv_control_stats *stats,
                       char *err, size_t errlen);
int driver_linux_stop(struct driver *d, char *err, size_t errlen);

/* Waits (bounded) for the guest daemon we started, removes its socket. */
void driver_linux_end(struct driver *d);

#endif
