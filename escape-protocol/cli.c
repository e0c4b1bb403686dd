/*
 * copstream — look into, validate and write escape-coded sample streams.
 *
 *   copstream dump [--no-samples] FILE     one line per sample, record,
 *                                          error and resynchronisation
 *   copstream check [--verbose] FILE       validate; print
 *                                          samples=N lost=N contexts=N errors=N
 *   copstream encode [-o OUT] [FILE]       the text form back into a stream
 *
 * FILE may be - for standard input.  The stream is read in 64 KiB pieces
 * and fed to the incremental decoder as it comes, as the daemon does with
 * its socket, so a stream of any size takes constant memory.
 *
 * Exit status: 0 when all is well, 1 when check found errors in the stream,
 * 2 for a usage error or a file that cannot be read or written.
 */
#include "escape-protocol/copstream.h"
#include "escape-protocol/text.h"
#include "common/cli.h"
#include "common/safe-file.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_ERRORS  1
#define EXIT_USAGE   2
#define READ_BYTES   65536
#define ERRORS_SHOWN 20        /* check prints at most this many errors */

static void usage(FILE *out)
{
    fputs(
        "usage: copstream dump [--no-samples] FILE\n"
        "       copstream check [--verbose] FILE\n"
        "       copstream encode [-o OUTPUT] [FILE]\n"
        "\n"
        "Reads and writes the escape-coded sample stream of the coprof kernel\n"
        "driver (the format is in escape-protocol/README.md).  FILE may be -\n"
        "for standard input.\n"
        "\n"
        "dump     prints one line per sample, record, decoding error and\n"
        "         resynchronisation: OFFSET TYPE key=value ...\n"
        "         -n, --no-samples   leave out the sample lines\n"
        "check    decodes the whole stream, prints its errors on standard\n"
        "         error (the first 20) and one line on standard output:\n"
        "         samples=N lost=N contexts=N errors=N\n"
        "         -v, --verbose      also print counts by record, lost cause\n"
        "                            and error kind\n"
        "encode   reads lines in the form dump prints (the offsets are\n"
        "         optional; error and resync lines, blank lines and # comments\n"
        "         are ignored) and writes the binary stream\n"
        "         -o, --output FILE  write there instead of standard output\n"
        "\n"
        "Exit status: 0 on success; 1 when check found errors in the stream;\n"
        "2 for a usage error or a file that cannot be read or written.\n",
        out);
}

static int open_input(const char *path)
{
    if (strcmp(path, "-") == 0)
        return STDIN_FILENO;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        cli_fail(EXIT_USAGE, "cannot open '%s': %s", path, strerror(errno));
    return fd;
}

/*
 * Feeds the whole of path to dec and finishes it; 0, or EXIT_USAGE after a
 * read error (what was decoded before it has been handled already; the
 * decoder is not finished, so no error is made up for the unread rest).
 */
static int decode_file(const char *path, struct copstream_decoder *dec)
{
    static uint8_t buffer[READ_BYTES];
    int fd = open_input(path);

    if (fd < 0)
        return EXIT_USAGE;
    for (;;) {
        ssize_t got = read(fd, buffer, sizeof buffer);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int saved = errno;
            if (fd != STDIN_FILENO)
                close(fd);
            return cli_fail(EXIT_USAGE, "cannot read '%s': %s", path, strerror(saved));
        }
        if (got == 0)
            break;
        copstream_decoder_feed(dec, buffer, (size_t)got);
    }
    copstream_decoder_finish(dec);
    if (fd != STDIN_FILENO)
        close(fd);
    return 0;
}

static struct copstream_decoder decoder;

/* ---- dump --------------------------------------------------------------- */

static void dump_samples(void *user, uint64_t offset,
                         const struct copstream_sample *samples, size_t count)
{
    copstream_text_samples(stdout, offset, samples, count);
}

static void dump_record(void *user, const struct copstream_record *rec)
{
    copstream_text_record(stdout, rec);
}

static void dump_error(void *user, const struct copstream_error *err)
{
    copstream_text_error(stdout, err);
}

static void dump_resync(void *user, uint64_t offset, uint64_t skipped)
{
    copstream_text_resync(stdout, offset, skipped);
}

static int run_dump(const char *path, int with_samples)
{
    struct copstream_handler handler = {
        with_samples ? dump_samples : NULL, dump_record, dump_error,
        dump_resync, NULL
    };

    copstream_decoder_init(&decoder, &handler);
    int status = decode_file(path, &decoder);
    if (fflush(stdout) != 0)
        return cli_fail(EXIT_USAGE, "cannot write the dump: %s", strerror(errno));
    return status;
}

/* ---- check -------------------------------------------------------------- */

static void check_error(void *user, const struct copstream_error *err)
{
    const char *path = user;
    uint64_t shown = decoder.stats.errors;   /* counted before the call */

    if (shown > ERRORS_SHOWN)
        return;
    const char *code = copstream_code_name(err->code);
    fprintf(stderr, "copstream: %s: offset %" PRIu64 ": %s", path,
            err->offset, copstream_error_name(err->kind));
    if (err->code != 0 && code)
        fprintf(stderr, " in a %s record", code);
    else if (err->code != 0)
        fprintf(stderr, " in a record of code %u", err->code);
    fputc('\n', stderr);
}

static void print_details(const struct copstream_stats *s)
{
    printf("bytes=%" PRIu64 " record_bytes=%" PRIu64 " skipped_bytes=%"
           PRIu64 " resyncs=%" PRIu64 "\n", s->bytes, s->record_bytes,
           s->skipped_bytes, s->resyncs);
    for (uint16_t code = 1; code < COPSTREAM_CODE_END; code++)
        printf("records.%s=%" PRIu64 "\n", copstream_code_name(code),
               s->records[code]);
    printf("records.unknown=%" PRIu64 "\nrepeated_starts=%" PRIu64 "\n",
           s->unknown_records, s->repeated_starts);
    for (uint32_t cause = 1; cause < COPSTREAM_LOST_CAUSE_END; cause++)
        printf("lost.%s=%" PRIu64 "\n", copstream_cause_name(cause),
               s->lost_by_cause[cause]);
    printf("lost.other=%" PRIu64 "\n", s->lost_by_cause[0]);
    for (int kind = 1; kind < COPSTREAM_ERR_KIND_END; kind++)
        printf("errors.%s=%" PRIu64 "\n", copstream_error_name(kind),
               s->errors_by_kind[kind]);
}

static int run_check(const char *path, int verbose)
{
    struct copstream_handler handler = {
        NULL, NULL, check_error, NULL, (void *)path
    };

    copstream_decoder_init(&decoder, &handler);
    int status = decode_file(path, &decoder);
    if (status != 0)
        return status;

    const struct copstream_stats *s = &decoder.stats;
    if (s->errors > ERRORS_SHOWN)
        fprintf(stderr, "copstream: %s: %" PRIu64 " more errors not shown\n",
                path, s->errors - ERRORS_SHOWN);
    printf("samples=%" PRIu64 " lost=%" PRIu64 " contexts=%" PRIu64
           " errors=%" PRIu64 "\n", s->samples, s->lost,
           s->records[COPSTREAM_CONTEXT], s->errors);
    if (verbose)
        print_details(s);
    return s->errors > 0 ? EXIT_ERRORS : 0;
}

/* ---- encode ------------------------------------------------------------- */

static int encode_lines(FILE *in, const char *in_name, FILE *out,
                        const char *out_name)
{
    static uint8_t record[COPSTREAM_MAX_RECORD_BYTES];
    char *line = NULL, why[256];
    size_t capacity = 0;
    unsigned long number = 0;
    int status = 0;

    while (getline(&line, &capacity, in) >= 0) {
        number++;
        long bytes = copstream_text_encode(line, record, sizeof record, why,
                                           sizeof why);
        if (bytes < 0) {
            status = cli_fail(EXIT_USAGE, "%s:%lu: %s", in_name, number, why);
            break;
        }
        if (fwrite(record, 1, (size_t)bytes, out) != (size_t)bytes) {
            status = cli_fail(EXIT_USAGE, "cannot write '%s': %s", out_name, strerror(errno));
            break;
        }
    }
    if (status == 0 && ferror(in))
        status = cli_fail(EXIT_USAGE, "cannot read '%s': %s", in_name, strerror(errno));
    free(line);
    return status;
}

static int run_encode(const char *in_path, const char *out_path)
{
    FILE *in = stdin, *out = stdout;
    const char *out_name = out_path ? out_path : "standard output";
    struct safe_out safe;
    char err[512];

    if (out_path == NULL && isatty(STDOUT_FILENO))
        return cli_fail(EXIT_USAGE, "will not write a binary stream to a terminal: use -o "
                    "FILE or a pipe");
    if (strcmp(in_path, "-") != 0 && (in = fopen(in_path, "r")) == NULL)
        return cli_fail(EXIT_USAGE, "cannot open '%s': %s", in_path, strerror(errno));
    /* -o FILE by safe-file.h's rule: no planted link followed, a new
     * private file renamed over FILE once the whole stream is written */
    if (out_path && (safe_out_open(&safe, out_path, 0, err, sizeof(err)) < 0
                     || !safe_out_stdio(&safe, &out))) {
        if (safe.fd >= 0)
            snprintf(err, sizeof(err), "%s: %s", out_path, strerror(errno));
        safe_out_close(&safe, NULL, 0, err + strlen(err), 0);
        if (in != stdin)
            fclose(in);
        return cli_fail(EXIT_USAGE, "cannot create %s", err);
    }
    int status = encode_lines(in, strcmp(in_path, "-") == 0
                                      ? "standard input" : in_path,
                              out, out_name);
    if (in != stdin)
        fclose(in);
    if (out_path && safe_out_close(&safe, out, status == 0, err,
                                   sizeof(err)) < 0 && status == 0)
        status = cli_fail(EXIT_USAGE, "cannot write %s", err);
    if (!out_path && fflush(out) != 0 && status == 0)
        status = cli_fail(EXIT_USAGE, "cannot write '%s': %s", out_name, strerror(errno));
    return status;
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    static const struct cli_option options[] = {
        { 'n', "no-samples", no_argument, 0 },
        { 'v', "verbose", no_argument, 0 },
        { 'o', "output", required_argument, 0 },
        { 'h', "help", no_argument, 0 },
        CLI_END,
    };
    struct cli_parser parser;
    int no_samples = 0, verbose = 0, opt;
    const char *output = NULL;

    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *command = argv[1];
    if (strcmp(command, "-h") == 0 || strcmp(command, "--help") == 0) {
        usage(stdout);
        return 0;
    }
    optind = 2;
    cli_parser_init(&parser, options, "");
    while ((opt = cli_next(&parser, argc, argv)) != -1) {
        switch (opt) {
        case 'n': no_samples = 1; break;
        case 'v': verbose = 1; break;
        case 'o': output = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }

    int operands = argc - optind;
    const char *file = operands == 1 ? argv[optind] : NULL;
    if (strcmp(command, "dump") == 0 && file && !verbose && !output)
        return run_dump(file, !no_samples);
    if (strcmp(command, "check") == 0 && file && !no_samples && !output)
        return run_check(file, verbose);
    if (strcmp(command, "encode") == 0 && operands <= 1 && !no_samples &&
        !verbose)
        return run_encode(file ? file : "-", output);
    if (strcmp(command, "dump") != 0 && strcmp(command, "check") != 0 &&
        strcmp(command, "encode") != 0)
        return cli_fail(EXIT_USAGE, "'%s' is not a command: use dump, check or encode "
                    "(copstream --help)", command);
    usage(stderr);
    return EXIT_USAGE;
}
