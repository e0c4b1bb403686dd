/*
 * state-dir.h — the files of copsim's socket directory that programs other
 * than their writer read.
 *
 * Who writes and reads: copcontrol (control/state.c) writes
 * COPROF_SESSION_MARK, its coprofd's pid file, from --start to --stop;
 * libcop (sdk/libcop/private.c) only looks whether it is there: while it
 * is, a session is recording on that copsim and libcop never falls back
 * to a private copsim, so no context runs unprofiled.  Its content (the
 * pid, then the session directory) is copcontrol's own.
 *
 * Version rule: a name here is never reused for another meaning; a new
 * shared file gets a new name.
 */
#ifndef COPROF_ABI_STATE_DIR_H
#define COPROF_ABI_STATE_DIR_H

#define COPROF_SESSION_MARK     "coprofd.pid"

#endif /* COPROF_ABI_STATE_DIR_H */
