/*
 * session-dir.h — the names of a session directory's files
 * (docs/session-format.md): the database, the image cache and the lock.
 *
 * Who writes and reads: coprofd (daemon/store.c) creates SESSION_DB_NAME
 * and SESSION_CACHE_DIR in the session directory and holds an flock() on
 * SESSION_LOCK_NAME while it records; coprof-host (hostprof/store.c)
 * writes its tables into SESSION_DB_NAME; copcontrol and coprof
 * (control/session.c) read it, write its end keys and remove only these
 * names (with SQLite's -wal, -shm and -journal files beside the
 * database); copreport (report/coprof_report/session.py, which reads this
 * header with abi/cheader.py) reads the database and the cache, and looks
 * at the lock to tell a live session.  The schema of SESSION_DB_NAME is
 * abi/session-schema.sql.
 *
 * Version rule: a name here is never reused for another meaning; a new
 * file of a session gets a new name (and the session format's version
 * rule, abi/session-schema.sql, says whether readers must know it).
 */
#ifndef COPROF_ABI_SESSION_DIR_H
#define COPROF_ABI_SESSION_DIR_H

#define SESSION_DB_NAME         "session.db"    /* SQLite, WAL */
#define SESSION_CACHE_DIR       "images"        /* copies of the images */
#define SESSION_LOCK_NAME       ".lock"         /* flock()ed by coprofd */

#endif /* COPROF_ABI_SESSION_DIR_H */
