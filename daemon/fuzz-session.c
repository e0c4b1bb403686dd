/*
 * fuzz-session.c — a libFuzzer target for coprofd's stream processing:
 * decode, attribute (with a real overlay image), aggregate, and write into
 * a session database.
 *
 * The first input byte chooses a prefix: none (the input is the whole
 * stream) or a sound beginning — START, the image's path, contexts on two
 * slots with their first guard reads — so that mutations reach deep into
 * attribution instead of dying at the decoder's door.  The rest is fed in
 * two pieces split where the second byte says.  After the end, every
 * decoded sample must be in exactly one count (exact, ambiguous, unmapped,
 * orphan), none pending or open, and writing the session's rows must
 * succeed; the transaction is rolled back so the database stays small.
 *
 * The image is overlay/'s test image, found through COPROFD_FUZZ_IMAGE or
 * the path built in.
 */
#include "daemon/images.h"
#include "daemon/session.h"
#include "daemon/store.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_IMAGE
#define FUZZ_IMAGE "build/tests/overlay/overlays.elf"
#endif

static char *session_dir;
static struct store *store;
static uint8_t prefix[4096];
static size_t prefix_length;

static void add(const struct copstream_record *rec)
{
    int n = copstream_encode_record(prefix + prefix_length,
                                    sizeof prefix - prefix_length, rec);
    if (n < 0)
        abort();
    prefix_length += (size_t)n;
}

static void build_prefix(const char *path)
{
    struct copstream_record rec = { .code = COPSTREAM_START };
    gchar *bytes;
    gsize length;
    struct stat st;

    if (stat(path, &st) != 0 ||
        !g_file_get_contents(path, &bytes, &length, NULL)) {
        fprintf(stderr, "fuzz-session: %s: cannot read\n", path);
        exit(1);
    }
    struct copstream_image_id id = {
        (uint64_t)st.st_dev, (uint64_t)st.st_ino, (uint64_t)st.st_size,
        image_content_hash((const uint8_t *)bytes, length),
    };
    g_free(bytes);
    rec.u.start = (struct copstream_start){
        COPSTREAM_VERSION, 4, 0xFFFFFE, 1, 1000000000, 1024, 262144, 1000, 0,
    };
    add(&rec);
    rec = (struct copstream_record){ .code = COPSTREAM_IMAGE };
    rec.u.image = (struct copstream_image){ id, (uint32_t)strlen(path),
                                            (const uint8_t *)path };
    add(&rec);
    for (uint32_t slot = 0; slot < 2; slot++) {
        rec = (struct copstream_record){ .code = COPSTREAM_CONTEXT };
        rec.u.context = (struct copstream_context){
            .slot = slot, .pid = 1, .tid = slot, .context_id = slot + 1,
            .image = id,
        };
        add(&rec);
        for (uint32_t region = 0; region < 3; region++) {
            rec = (struct copstream_record){ .code = COPSTREAM_OVERLAY };
            rec.u.overlay = (struct copstream_overlay){
                .slot = slot, .region = region,
                .guard = region == 0 ? 1 + slot : 4 * (region == 1),
            };
            add(&rec);
        }
    }
}

/* At exit: the temporary session directory goes. */
static void remove_session_dir(void)
{
    static const char *const names[] = {
        SESSION_DB_NAME, SESSION_DB_NAME "-wal", SESSION_DB_NAME "-shm",
        SESSION_LOCK_NAME,
    };
    char *cache = g_build_filename(session_dir, SESSION_CACHE_DIR, NULL);
    GDir *dir = g_dir_open(cache, 0, NULL);
    const char *name;

    store_close(store);
    while (dir != NULL && (name = g_dir_read_name(dir)) != NULL) {
        char *path = g_build_filename(cache, name, NULL);
        remove(path);
        g_free(path);
    }
    if (dir != NULL)
        g_dir_close(dir);
    remove(cache);
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        char *path = g_build_filename(session_dir, names[i], NULL);
        remove(path);
        g_free(path);
    }
    remove(session_dir);
    g_free(cache);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *image = getenv("COPROFD_FUZZ_IMAGE");
    GError *error = NULL;

    build_prefix(image ? image : FUZZ_IMAGE);
    session_dir = g_dir_make_tmp("fuzz-session-XXXXXX", NULL);
    store = session_dir ? store_open(session_dir, true, &error) : NULL;
    if (store == NULL) {
        fprintf(stderr, "fuzz-session: %s\n",
                error ? error->message : "no temporary directory");
        exit(1);
    }
    atexit(remove_session_dir);
    return 0;
}

static void check(struct session *s)
{
    struct session_totals t;

    session_get_totals(s, &t);
    if (t.exact + t.ambiguous + t.unmapped + t.orphan != t.samples ||
        t.pending != 0 || t.open != 0) {
        fprintf(stderr, "fuzz-session: samples %llu, counted %llu + %llu + "
                "%llu + %llu, pending %llu, open %llu\n",
                (unsigned long long)t.samples, (unsigned long long)t.exact,
                (unsigned long long)t.ambiguous,
                (unsigned long long)t.unmapped,
                (unsigned long long)t.orphan, (unsigned long long)t.pending,
                (unsigned long long)t.open);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    struct session *s = session_new(session_dir, 1000, true);
    bool with_prefix = data[0] & 1;
    size_t split = data[1] % (size - 1);

    if (with_prefix)
        session_feed(s, prefix, prefix_length);
    data += 2;
    size -= 2;
    session_feed(s, data, split);
    session_feed(s, data + split, size - split);
    session_finish(s);
    check(s);
    if (store_begin(store, NULL) != 0 || session_write(s, store) != 0) {
        fprintf(stderr, "fuzz-session: %s\n", store_last_error(store));
        abort();
    }
    store_rollback(store);
    session_free(s);
    return 0;
}
