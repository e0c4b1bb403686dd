/*
 * coplog — read and control a coprof event log from the command line.
 *
 *   coplog dump FILE     every record, all subsystems merged in order
 *   coplog tail FILE     the last records, then new ones as they come
 *   coplog stat FILE     per-subsystem fill, overwritten and refused counts
 *   coplog set FILE S V  a subsystem's level, on/off or echo, at run time
 *   coplog create FILE SPEC...   a new log
 *   coplog write FILE S FORMAT ARGS...   one record, from a script
 *
 * Each command is a small function over the library in coplog.h; this file
 * only parses arguments and prints.  `coplog --help` is the manual.
 * Errors print one line "coplog: ..." on stderr (common/cli.h's cli_fail); the
 * exit status is 1 for a file that cannot be read or written and 2 for bad
 * usage.
 */
#include "eventlog/coplog.h"
#include "eventlog/message.h"
#include "common/cli.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXIT_FAILED 1
#define EXIT_USAGE  2
#define MESSAGE_MAX 4096
#define TAIL_DEFAULT_LINES 10
#define SPEC_MAX_SUBSYS COPLOG_MAX_SUBSYS

/* The manual: a table of commands, from which both `coplog --help` and
 * `coplog COMMAND --help` are printed. */
struct command_doc {
    const char *name;
    const char *synopsis;       /* what follows "coplog ", in lines */
    const char *description;    /* lines, printed indented */
    const char *options;        /* its options, lines */
};

static const struct command_doc command_docs[] = {
    { "dump",
      "dump FILE [--subsys S]... [--since T | --since-order N]\n"
      "[--format text|json] [--long]",
      "Prints every record in the file now, merged in order.  Slots a\n"
      "writer reserved but never committed (it was killed) are counted,\n"
      "never printed half-written.",
      "--subsys S        only the subsystem S; repeat for more\n"
      "--since T         only records at or after T, in CLOCK_MONOTONIC\n"
      "                  seconds as dump prints them\n"
      "--since-order N   only records whose order is at least N\n"
      "--format F        text (default) or json: one JSON object per line\n"
      "--long            text with the order, ring:seq and caller address" },
    { "tail",
      "tail FILE [--subsys S]... [-n N] [--interval SECONDS]\n"
      "[--format text|json] [--long]",
      "Prints the last N records (default 10), then follows the file and\n"
      "prints records as they are committed, in order, until interrupted.\n"
      "A record is printed only once no record with an earlier order can\n"
      "still appear.",
      "--subsys S        only the subsystem S; repeat for more\n"
      "-n, --lines N     how many records to show first (default 10)\n"
      "--interval S      seconds between looks at the file (default 0.1)\n"
      "--format F        text (default) or json\n"
      "--long            text with the order, ring:seq and caller address" },
    { "stat",
      "stat FILE [--format text|json]",
      "Prints the clock, the format table and, per subsystem: policy,\n"
      "rings, capacity, level, on/off, echo, slots reserved, records\n"
      "present and fill, overwritten (cyclic), refused (one-shot), skipped,\n"
      "in progress and unclaimed.  When no writer is active, reserved =\n"
      "records + in progress + unclaimed + overwritten + refused.",
      "--format F        text (default) or json" },
    { "set",
      "set FILE SUBSYS LEVEL|on|off|echo|noecho",
      "Changes a subsystem (or 'all') at run time: a level keeps the\n"
      "records at or below it; on and off enable and disable it; echo and\n"
      "noecho turn printing each record on the writer's stderr on and off.\n"
      "Writers see the change at their next record.",
      NULL },
    { "create",
      "create FILE SPEC... [--clock auto|tsc|monotonic] [--formats N]\n"
      "[--format-bytes N]",
      "Creates (or replaces) a log.  Each SPEC is NAME[,OPTION]... with\n"
      "the options records=N (per ring, a power of two; default 4096),\n"
      "cyclic or oneshot, args=N (arguments per record, 4 or up to 12),\n"
      "strings=BYTES (string area per ring, suffixes K and M), level=LEVEL,\n"
      "off, echo, and shared (one ring for all CPUs instead of one per CPU).",
      "--clock C         auto (default: the TSC when invariant), tsc or\n"
      "                  monotonic\n"
      "--formats N       distinct formats the log can hold (4096)\n"
      "--format-bytes N  bytes for their text (262144)" },
    { "write",
      "write FILE SUBSYS [--level LEVEL] FORMAT [ARG]...",
      "Adds one record, with the arguments converted as FORMAT's\n"
      "conversions say (default level terse).  Put -- before FORMAT when it\n"
      "or an argument begins with '-'.",
      "--level L         the record's level" },
};

#define COMMAND_COUNT (sizeof command_docs / sizeof command_docs[0])

static const char manual_description[] =
    "The event log is coprof's flight recorder: a file holding, for each\n"
    "subsystem (SCHED for copsim's scheduler, and others), circular buffers\n"
    "of fixed-size records, one per CPU.  Writers (copsim, the driver, the\n"
    "daemon, host programs) add records without locks; coplog reads them\n"
    "while they are written or long after the writers died.  A record keeps\n"
    "its printf format as a reference and its arguments as raw words:\n"
    "coplog formats them.  Timestamps are converted to CLOCK_MONOTONIC\n"
    "seconds, the timeline every coprof part shares, and all subsystems are\n"
    "merged in the log's global order.";

static const char manual_end[] =
    "LEVELS\n"
    "    error (1), warning (2), terse (3), verbose (4), prolog (5).\n"
    "\n"
    "OUTPUT\n"
    "    A text line is: TIME SUBSYS LEVEL cpuN PID/TID MESSAGE, TIME in\n"
    "    CLOCK_MONOTONIC seconds.  --long adds #ORDER and RING:SEQ after TIME\n"
    "    and the caller address before the message.  A JSON line has order,\n"
    "    time_ns, subsys, ring, seq, level, cpu, pid, tid, caller, format, args\n"
    "    (numbers, strings, and pointers as \"0x...\") and message.  dump and\n"
    "    tail end with a line on stderr when records were missed (overwritten\n"
    "    before they could be read), unfinished or late.\n"
    "\n"
    "EXIT STATUS\n"
    "    0 on success; 1 when the file cannot be read or written (missing,\n"
    "    truncated, corrupt: one line says which and why) or refuses a record;\n"
    "    2 on bad usage.\n"
    "\n"
    "EXAMPLES\n"
    "    coplog create run.coplog SCHED,records=65536 APP,records=1024,oneshot\n"
    "    coplog write run.coplog APP 'phase %s took %.3f ms' decode 12.5\n"
    "    coplog dump run.coplog --subsys SCHED --format json\n"
    "    coplog set run.coplog SCHED prolog\n"
    "    coplog tail run.coplog -n 0\n";

/* Prints text with each line indented. */
static void print_indented(const char *text, const char *indent)
{
    while (*text != '\0') {
        size_t length = strcspn(text, "\n");

        printf("%s%.*s\n", indent, (int)length, text);
        text += length + (text[length] == '\n');
    }
}

/* "coplog " and the synopsis, its later lines under the first operand. */
static void print_synopsis(const struct command_doc *doc)
{
    char indent[32];

    snprintf(indent, sizeof indent, "%*s", (int)strlen(doc->name) + 12, "");
    printf("    coplog %.*s\n", (int)strcspn(doc->synopsis, "\n"),
           doc->synopsis);
    if (strchr(doc->synopsis, '\n') != NULL)
        print_indented(strchr(doc->synopsis, '\n') + 1, indent);
}

static void print_manual(void)
{
    fputs("NAME\n    coplog - read and control coprof's kernel event log\n\n"
          "SYNOPSIS\n", stdout);
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        print_synopsis(&command_docs[i]);
    fputs("    coplog [COMMAND] --help\n\nDESCRIPTION\n", stdout);
    print_indented(manual_description, "    ");
    fputs("\nCOMMANDS\n", stdout);
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        printf("    %s\n", command_docs[i].name);
        print_indented(command_docs[i].description, "        ");
    }
    fputs("\nOPTIONS\n", stdout);
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        if (command_docs[i].options == NULL)
            continue;
        printf("    %s:\n", command_docs[i].name);
        print_indented(command_docs[i].options, "        ");
    }
    fputs("    -h, --help        this manual; after a command, its part\n\n",
          stdout);
    fputs(manual_end, stdout);
}

static void command_help(const char *command)
{
    for (size_t i = 0; i < COMMAND_COUNT; i++) {
        const struct command_doc *doc = &command_docs[i];

        if (strcmp(doc->name, command) != 0)
            continue;
        fputs("SYNOPSIS\n", stdout);
        print_synopsis(doc);
        fputs("\nDESCRIPTION\n", stdout);
        print_indented(doc->description, "    ");
        if (doc->options != NULL) {
            fputs("\nOPTIONS\n", stdout);
            print_indented(doc->options, "    ");
        }
        fputs("\nSee coplog --help for levels, output and exit status.\n",
              stdout);
    }
}

/* ------------------------------------------------------------ options */

struct options {
    const char *subsys[SPEC_MAX_SUBSYS];
    unsigned subsys_count;
    const char *since, *since_order;
    bool json, long_text;
    long lines;
    double interval;
    const char *clock, *formats, *format_bytes, *level;
};

enum {
    OPT_SUBSYS = 256, OPT_SINCE, OPT_SINCE_ORDER, OPT_FORMAT, OPT_LONG,
    OPT_INTERVAL, OPT_CLOCK, OPT_FORMATS, OPT_FORMAT_BYTES, OPT_LEVEL
};

static const struct cli_option long_options[] = {
    { 0, "subsys", required_argument, OPT_SUBSYS },
    { 0, "since", required_argument, OPT_SINCE },
    { 0, "since-order", required_argument, OPT_SINCE_ORDER },
    { 0, "format", required_argument, OPT_FORMAT },
    { 0, "long", no_argument, OPT_LONG },
    { 'n', "lines", required_argument, 0 },
    { 0, "interval", required_argument, OPT_INTERVAL },
    { 0, "clock", required_argument, OPT_CLOCK },
    { 0, "formats", required_argument, OPT_FORMATS },
    { 0, "format-bytes", required_argument, OPT_FORMAT_BYTES },
    { 0, "level", required_argument, OPT_LEVEL },
    { 'h', "help", no_argument, 0 },
    CLI_END,
};

static int parse_number(const char *text, const char *what, double low,
                        double high, double *value)
{
    char *end;

    errno = 0;
    *value = strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !(*value >= low) ||
        !(*value <= high))
        return cli_fail(EXIT_USAGE, "%s '%s' is not a number from %g to %g", what,
                    text, low, high);
    return 0;
}

/* Parses options into *o; operands stay in argv from optind (getopt moves
 * them there; "--" ends the options). */
static int parse_options(int argc, char **argv, const char *command,
                         struct options *o)
{
    double lines;
    struct cli_parser parser;
    int opt;

    memset(o, 0, sizeof *o);
    o->lines = TAIL_DEFAULT_LINES;
    o->interval = 0.1;
    cli_parser_init(&parser, long_options, "");
    while ((opt = cli_next(&parser, argc, argv)) != -1) {
        switch (opt) {
        case OPT_SUBSYS:
            if (o->subsys_count == SPEC_MAX_SUBSYS)
                return cli_fail(EXIT_USAGE, "too many --subsys");
            o->subsys[o->subsys_count++] = optarg;
            break;
        case OPT_SINCE: o->since = optarg; break;
        case OPT_SINCE_ORDER: o->since_order = optarg; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
                return cli_fail(EXIT_USAGE, "format '%s' is neither text nor json",
                            optarg);
            o->json = strcmp(optarg, "json") == 0;
            break;
        case OPT_LONG: o->long_text = true; break;
        case 'n':
            if (parse_number(optarg, "line count", 0, 1e9, &lines) != 0)
                return EXIT_USAGE;
            o->lines = (long)lines;
            break;
        case OPT_INTERVAL:
            if (parse_number(optarg, "interval", 0.001, 3600, &o->interval))
                return EXIT_USAGE;
            break;
        case OPT_CLOCK: o->clock = optarg; break;
        case OPT_FORMATS: o->formats = optarg; break;
        case OPT_FORMAT_BYTES: o->format_bytes = optarg; break;
        case OPT_LEVEL: o->level = optarg; break;
        case 'h':
            command_help(command);
            exit(0);
        default:
            return cli_fail(EXIT_USAGE, "see coplog %s --help", command);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ printing */

static void json_string(FILE *out, const char *text)
{
    const unsigned char *at = (const unsigned char *)text;

    fputc('"', out);
    while (*at != '\0') {
        unsigned char c = *at;
        int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC0 ? 1 : 0;
        bool valid = c < 0x80 || (c >= 0xC2 && c <= 0xF4);

        for (int i = 1; valid && i <= extra; i++)
            valid = (at[i] & 0xC0) == 0x80;
        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
        } else if (!valid) {
            fputs("\\ufffd", out);  /* not UTF-8: JSON cannot carry it */
        } else {
            fwrite(at, 1, (size_t)extra + 1, out);
            at += extra;
        }
        at++;
    }
    fputc('"', out);
}

static void json_arg(FILE *out, const struct coplog_event *event, unsigned i,
                     char conversion)
{
    double real;

    if (event->strings[i] != NULL) {
        json_string(out, event->strings[i]);
        return;
    }
    switch (conversion) {
    case 'd': case 'i': case 'c': case '*':
        fprintf(out, "%" PRId64, (int64_t)event->args[i]);
        break;
    case 'e': case 'E': case 'f': case 'F':
    case 'g': case 'G': case 'a': case 'A':
        memcpy(&real, &event->args[i], sizeof real);
        if (isfinite(real))
            fprintf(out, "%.17g", real);
        else
            fputs("null", out);
        break;
    case 'p': case 'n': case 's':
        fprintf(out, "\"0x%" PRIx64 "\"", event->args[i]);
        break;
    default:
        fprintf(out, "%" PRIu64, event->args[i]);
        break;
    }
}

static void print_json(FILE *out, const struct coplog_event *event,
                       const char *message)
{
    char conversions[COPLOG_MAX_ARGS] = { 0 };

    if (event->format != NULL)
        message_conversions(event->format, conversions, COPLOG_MAX_ARGS);
    fprintf(out, "{\"order\":%" PRIu64 ",\"time_ns\":%" PRIu64 ",\"subsys\":",
            event->order, event->time_ns);
    json_string(out, event->subsys_name);
    fprintf(out, ",\"ring\":%u,\"seq\":%" PRIu64 ",\"level\":\"%s\",\"cpu\":%u,"
            "\"pid\":%u,\"tid\":%u,\"caller\":\"0x%" PRIx64 "\",\"format\":",
            event->ring, event->seq, coplog_level_name(event->level),
            event->cpu, event->pid, event->tid, event->caller);
    if (event->format != NULL)
        json_string(out, event->format);
    else
        fputs("null", out);
    fputs(",\"args\":[", out);
    for (unsigned i = 0; i < event->nargs; i++) {
        if (i > 0)
            fputc(',', out);
        json_arg(out, event, i, conversions[i]);
    }
    fputs("],\"message\":", out);
    json_string(out, message);
    fputs("}\n", out);
}

static void print_text(FILE *out, const struct coplog_event *event,
                       const char *message, bool long_text)
{
    fprintf(out, "%6" PRIu64 ".%09" PRIu64, event->time_ns / 1000000000u,
            event->time_ns % 1000000000u);
    if (long_text)
        fprintf(out, " #%" PRIu64 " %u:%" PRIu64, event->order, event->ring,
                event->seq);
    fprintf(out, " %-8s %-7s cpu%-3u %u/%u", event->subsys_name,
            coplog_level_name(event->level), event->cpu, event->pid,
            event->tid);
    if (long_text)
        fprintf(out, " 0x%" PRIx64, event->caller);
    fprintf(out, "  %s\n", message);
}

static void print_event(FILE *out, const struct coplog_event *event,
                        const struct options *o)
{
    char message[MESSAGE_MAX];

    coplog_event_format(event, message, sizeof message);
    if (o->json)
        print_json(out, event, message);
    else
        print_text(out, event, message, o->long_text);
}

/* The counts worth a warning, on stderr after dump and tail. */
static void print_losses(const struct coplog_reader *reader)
{
    struct coplog_read_counts counts;

    coplog_reader_counts(reader, &counts);
    if (counts.missed + counts.unfinished + counts.late == 0)
        return;
    fprintf(stderr, "coplog: %" PRIu64 " records read, %" PRIu64 " missed "
            "(overwritten before read), %" PRIu64 " unfinished (writer died "
            "or stalled), %" PRIu64 " late\n", counts.delivered, counts.missed,
            counts.unfinished, counts.late);
}

/* ------------------------------------------------------------ reading */

static struct coplog_reader *open_reader(const char *path,
                                         const struct options *o, int *status)
{
    char error[COPLOG_ERROR_MAX];
    struct coplog_reader *reader = coplog_reader_open(path, error);

    *status = EXIT_FAILED;
    if (reader == NULL) {
        cli_fail(EXIT_FAILED, "%s", error);
        return NULL;
    }
    for (unsigned i = 0; i < o->subsys_count; i++) {
        if (coplog_reader_select(reader, o->subsys[i]) < 0) {
            cli_fail(EXIT_USAGE, "%s", coplog_reader_error(reader));
            *status = EXIT_USAGE;
            coplog_reader_close(reader);
            return NULL;
        }
    }
    *status = 0;
    return reader;
}

static int apply_since(struct coplog_reader *reader, const struct options *o)
{
    double value;

    if (o->since != NULL && o->since_order != NULL)
        return cli_fail(EXIT_USAGE, "--since and --since-order exclude each other");
    if (o->since != NULL) {
        if (parse_number(o->since, "--since time", 0, 1e12, &value) != 0)
            return EXIT_USAGE;
        coplog_reader_seek(reader, coplog_reader_ns_order(
                                       reader, (uint64_t)(value * 1e9 + 0.5)));
    }
    if (o->since_order != NULL) {
        char *end;
        unsigned long long order;

        errno = 0;
        order = strtoull(o->since_order, &end, 0);
        if (end == o->since_order || *end != '\0' || errno != 0)
            return cli_fail(EXIT_USAGE, "--since-order '%s' is not a number",
                        o->since_order);
        coplog_reader_seek(reader, order);
    }
    return 0;
}

static int command_dump(const char *path, const struct options *o)
{
    struct coplog_event event;
    struct coplog_reader *reader;
    int status;

    if ((reader = open_reader(path, o, &status)) == NULL)
        return status;
    if ((status = apply_since(reader, o)) != 0) {
        coplog_reader_close(reader);
        return status;
    }
    while ((status = coplog_reader_next(reader, &event, COPLOG_READ_ALL)) > 0)
        print_event(stdout, &event, o);
    if (status < 0)
        cli_fail(EXIT_FAILED, "%s", coplog_reader_error(reader));
    print_losses(reader);
    coplog_reader_close(reader);
    return status < 0 ? EXIT_FAILED : 0;
}

static volatile sig_atomic_t interrupted;

static void on_signal(int signal_number)
{
    (void)signal_number;
    interrupted = 1;
}

/* The first records of tail: everything readable now, of which the last
 * o->lines are printed. */
static int tail_backlog(struct coplog_reader *reader, const struct options *o)
{
    struct coplog_event event;
    char **lines = calloc((size_t)o->lines + 1, sizeof *lines);
    size_t count = 0, first = 0;
    int status;

    if (lines == NULL)
        return -1;
    while ((status = coplog_reader_next(reader, &event, COPLOG_READ_LIVE)) > 0) {
        char *text = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&text, &size);

        if (o->lines == 0 || out == NULL) {
            if (out != NULL)
                fclose(out);
            free(text);
            continue;
        }
        print_event(out, &event, o);
        fclose(out);
        if (count == (size_t)o->lines) {
            free(lines[first]);
            lines[first] = text;
            first = (first + 1) % count;
        } else {
            lines[count++] = text;
        }
    }
    for (size_t i = 0; i < count; i++) {
        fputs(lines[(first + i) % count], stdout);
        free(lines[(first + i) % count]);
    }
    free(lines);
    return status;
}

static int command_tail(const char *path, const struct options *o)
{
    struct timespec pause = { (time_t)o->interval,
                              (long)((o->interval - (time_t)o->interval) * 1e9) };
    struct coplog_event event;
    struct coplog_reader *reader;
    int status;

    if ((reader = open_reader(path, o, &status)) == NULL)
        return status;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    status = tail_backlog(reader, o);
    while (status >= 0 && !interrupted) {
        nanosleep(&pause, NULL);
        while ((status = coplog_reader_next(reader, &event,
                                            COPLOG_READ_LIVE)) > 0)
            print_event(stdout, &event, o);
    }
    if (status < 0)
        cli_fail(EXIT_FAILED, "%s", coplog_reader_error(reader));
    print_losses(reader);
    coplog_reader_close(reader);
    return status < 0 ? EXIT_FAILED : 0;
}

/* ------------------------------------------------------------ stat */

static const char *policy_name(enum coplog_policy policy)
{
    return policy == COPLOG_ONESHOT ? "oneshot" : "cyclic";
}

static double fill_percent(const struct coplog_subsys_stat *s)
{
    double slots = (double)s->capacity * s->rings;

    return slots > 0 ? 100.0 * (double)s->committed / slots : 0;
}

static void stat_text(struct coplog_reader *reader, const char *path)
{
    struct coplog_file_info info;
    char created[64];
    time_t seconds;

    coplog_reader_info(reader, &info);
    seconds = (time_t)(info.created_realtime_ns / 1000000000u);
    strftime(created, sizeof created, "%Y-%m-%d %H:%M:%S",
             localtime(&seconds));
    printf("log %s: %" PRIu64 " bytes, created %s by pid %u\n", path,
           info.file_bytes, created, info.creator_pid);
    printf("clock: %s at %.6f MHz, %u calibration pairs; %u CPU rings per "
           "subsystem\n", info.clock == COPLOG_CLOCK_TSC ? "tsc" : "monotonic",
           info.clock_hz / 1e6, info.calibrations, info.cpu_rings);
    printf("formats: %u of %u slots, %" PRIu64 " of %" PRIu64 " bytes, %"
           PRIu64 " refused\n\n", info.formats, info.format_slots,
           info.format_bytes_used, info.format_bytes, info.formats_refused);
    printf("%-15s %-7s %5s %9s %4s %-7s %-3s %-4s %10s %10s %6s %11s %9s %7s "
           "%11s %9s\n", "SUBSYS", "POLICY", "RINGS", "CAPACITY", "ARGS",
           "LEVEL", "ON", "ECHO", "RESERVED", "RECORDS", "FILL", "OVERWRITTEN",
           "REFUSED", "SKIPPED", "IN-PROGRESS", "UNCLAIMED");
    for (unsigned i = 0; i < coplog_reader_subsys_count(reader); i++) {
        struct coplog_subsys_stat s;

        coplog_reader_stat(reader, i, &s);
        printf("%-15s %-7s %5u %9u %4u %-7s %-3s %-4s %10" PRIu64 " %10" PRIu64
               " %5.1f%% %11" PRIu64 " %9" PRIu64 " %7" PRIu64 " %11" PRIu64
               " %9" PRIu64 "\n", s.name, policy_name(s.policy), s.rings,
               s.capacity, s.args, coplog_level_name(s.level),
               s.enabled ? "on" : "off", s.echo ? "on" : "off", s.reserved,
               s.committed, fill_percent(&s), s.overwritten, s.refused,
               s.skipped, s.in_progress, s.unclaimed);
    }
}

static void stat_json(struct coplog_reader *reader, const char *path)
{
    struct coplog_file_info info;

    coplog_reader_info(reader, &info);
    fputs("{\"file\":", stdout);
    json_string(stdout, path);
    printf(",\"bytes\":%" PRIu64 ",\"creator_pid\":%u,\"clock\":\"%s\","
           "\"clock_hz\":%.3f,\"calibrations\":%u,\"cpu_rings\":%u,"
           "\"formats\":%u,\"format_slots\":%u,\"format_bytes_used\":%" PRIu64
           ",\"format_bytes\":%" PRIu64 ",\"formats_refused\":%" PRIu64
           ",\"subsystems\":[", info.file_bytes, info.creator_pid,
           info.clock == COPLOG_CLOCK_TSC ? "tsc" : "monotonic", info.clock_hz,
           info.calibrations, info.cpu_rings, info.formats, info.format_slots,
           info.format_bytes_used, info.format_bytes, info.formats_refused);
    for (unsigned i = 0; i < coplog_reader_subsys_count(reader); i++) {
        struct coplog_subsys_stat s;

        coplog_reader_stat(reader, i, &s);
        printf("%s{\"name\":", i ? "," : "");
        json_string(stdout, s.name);
        printf(",\"policy\":\"%s\",\"rings\":%u,\"capacity\":%u,\"args\":%u,"
               "\"level\":\"%s\",\"enabled\":%s,\"echo\":%s,\"reserved\":%"
               PRIu64 ",\"records\":%" PRIu64 ",\"fill\":%.4f,\"overwritten\":%"
               PRIu64 ",\"refused\":%" PRIu64 ",\"skipped\":%" PRIu64
               ",\"in_progress\":%" PRIu64 ",\"unclaimed\":%" PRIu64
               ",\"string_bytes\":%" PRIu64 ",\"strings_used\":%" PRIu64 "}",
               policy_name(s.policy), s.rings, s.capacity, s.args,
               coplog_level_name(s.level), s.enabled ? "true" : "false",
               s.echo ? "true" : "false", s.reserved, s.committed,
               fill_percent(&s) / 100, s.overwritten, s.refused, s.skipped,
               s.in_progress, s.unclaimed, s.string_bytes, s.strings_used);
    }
    puts("]}");
}

static int command_stat(const char *path, const struct options *o)
{
    struct coplog_reader *reader;
    int status;

    if ((reader = open_reader(path, o, &status)) == NULL)
        return status;
    if (o->json)
        stat_json(reader, path);
    else
        stat_text(reader, path);
    coplog_reader_close(reader);
    return 0;
}

/* ------------------------------------------------------------ set */

static int command_set(const char *path, const char *subsys, const char *value)
{
    char error[COPLOG_ERROR_MAX];
    enum coplog_control_change change;
    int level = 0;

    if (strcmp(value, "on") == 0)
        change = COPLOG_CHANGE_ENABLE;
    else if (strcmp(value, "off") == 0)
        change = COPLOG_CHANGE_DISABLE;
    else if (strcmp(value, "echo") == 0)
        change = COPLOG_CHANGE_ECHO_ON;
    else if (strcmp(value, "noecho") == 0)
        change = COPLOG_CHANGE_ECHO_OFF;
    else if ((level = coplog_level_parse(value)) > 0)
        change = COPLOG_CHANGE_LEVEL;
    else
        return cli_fail(EXIT_USAGE, "'%s' is not a level (error, warning, terse, "
                    "verbose, prolog or 1-5), on, off, echo or noecho", value);
    if (coplog_control(path, subsys, change, (unsigned)level, error) < 0)
        return cli_fail(EXIT_FAILED, "%s", error);
    return 0;
}

/* ------------------------------------------------------------ create */

/* A size with an optional K or M suffix. */
static int parse_size(const char *text, const char *what, uint64_t limit,
                      uint64_t *value)
{
    char *end;
    unsigned long long number;

    errno = 0;
    number = strtoull(text, &end, 0);
    if (*end == 'K' || *end == 'k')
        number <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        number <<= 20, end++;
    if (end == text || *end != '\0' || errno != 0 || text[0] == '-' ||
        number > limit)
        return cli_fail(EXIT_USAGE, "%s '%s' is not a size from 0 to %" PRIu64,
                    what, text, limit);
    *value = number;
    return 0;
}

static int parse_spec_option(char *option, struct coplog_subsys_config *c)
{
    char *value = strchr(option, '=');
    uint64_t number;
    int level;

    if (value != NULL)
        *value++ = '\0';
    if (value == NULL && strcmp(option, "cyclic") == 0)
        c->policy = COPLOG_CYCLIC;
    else if (value == NULL && strcmp(option, "oneshot") == 0)
        c->policy = COPLOG_ONESHOT;
    else if (value == NULL && strcmp(option, "off") == 0)
        c->disabled = true;
    else if (value == NULL && strcmp(option, "echo") == 0)
        c->echo = true;
    else if (value == NULL && strcmp(option, "shared") == 0)
        c->shared_ring = true;
    else if (value != NULL && strcmp(option, "records") == 0) {
        if (parse_size(value, "records", 1u << 24, &number) != 0)
            return EXIT_USAGE;
        c->capacity = (uint32_t)number;
    } else if (value != NULL && strcmp(option, "args") == 0) {
        if (parse_size(value, "args", COPLOG_MAX_ARGS, &number) != 0)
            return EXIT_USAGE;
        c->args = (unsigned)number;
    } else if (value != NULL && strcmp(option, "strings") == 0) {
        if (parse_size(value, "strings", 1u << 30, &number) != 0)
            return EXIT_USAGE;
        c->string_bytes = (uint32_t)number;
    } else if (value != NULL && strcmp(option, "level") == 0) {
        if ((level = coplog_level_parse(value)) < 0)
            return cli_fail(EXIT_USAGE, "level '%s' is not error, warning, terse, "
                        "verbose, prolog or 1-5", value);
        c->level = (enum coplog_level)level;
    } else {
        return cli_fail(EXIT_USAGE, "'%s' is not a subsystem option (records=N, "
                    "cyclic, oneshot, args=N, strings=BYTES, level=L, off, "
                    "echo, shared)", option);
    }
    return 0;
}

static int parse_spec(char *spec, struct coplog_subsys_config *c)
{
    char *option, *rest = spec;

    memset(c, 0, sizeof *c);
    c->name = strsep(&rest, ",");
    while ((option = strsep(&rest, ",")) != NULL)
        if (parse_spec_option(option, c) != 0)
            return EXIT_USAGE;
    return 0;
}

static int parse_clock(const char *text, enum coplog_clock *clock)
{
    if (text == NULL || strcmp(text, "auto") == 0)
        *clock = COPLOG_CLOCK_AUTO;
    else if (strcmp(text, "tsc") == 0)
        *clock = COPLOG_CLOCK_TSC;
    else if (strcmp(text, "monotonic") == 0)
        *clock = COPLOG_CLOCK_MONOTONIC;
    else
        return cli_fail(EXIT_USAGE, "clock '%s' is not auto, tsc or monotonic",
                    text);
    return 0;
}

static int command_create(const char *path, char **specs, int count,
                          const struct options *o)
{
    struct coplog_subsys_config subsys[SPEC_MAX_SUBSYS];
    struct coplog_config config = { .subsys = subsys };
    char error[COPLOG_ERROR_MAX];
    struct coplog *log;
    uint64_t number;

    if (count < 1 || count > SPEC_MAX_SUBSYS)
        return cli_fail(EXIT_USAGE, "create needs 1 to %d subsystem specs",
                    SPEC_MAX_SUBSYS);
    for (int i = 0; i < count; i++)
        if (parse_spec(specs[i], &subsys[i]) != 0)
            return EXIT_USAGE;
    config.subsys_count = (unsigned)count;
    if (parse_clock(o->clock, &config.clock) != 0)
        return EXIT_USAGE;
    if (o->formats != NULL) {
        if (parse_size(o->formats, "--formats", 32768, &number) != 0)
            return EXIT_USAGE;
        config.format_slots = (uint32_t)number;
    }
    if (o->format_bytes != NULL) {
        if (parse_size(o->format_bytes, "--format-bytes", 1u << 30, &number))
            return EXIT_USAGE;
        config.format_bytes = (uint32_t)number;
    }
    log = coplog_create(path, &config, error);
    if (log == NULL)
        return cli_fail(EXIT_FAILED, "%s", error);
    coplog_close(log);
    return 0;
}

/* ------------------------------------------------------------ write */

static int convert_arg(const char *text, char conversion, union coplog_arg *arg)
{
    char *end = NULL;

    errno = 0;
    switch (conversion) {
    case 'd': case 'i': case '*':
        arg->i = strtoll(text, &end, 0);
        break;
    case 'c':
        arg->i = (unsigned char)text[0];
        return text[0] != '\0' && text[1] == '\0' ? 0 :
               cli_fail(EXIT_USAGE, "argument '%s' for %%c is not one character",
                    text);
    case 'o': case 'u': case 'x': case 'X':
        arg->u = strtoull(text, &end, 0);
        if (text[0] == '-')
            end = (char *)text;
        break;
    case 'e': case 'E': case 'f': case 'F':
    case 'g': case 'G': case 'a': case 'A':
        arg->d = strtod(text, &end);
        break;
    case 's':
        arg->s = text;
        return 0;
    case 'p': case 'n':
        arg->u = strtoull(text, &end, 16);
        break;
    default:
        return cli_fail(EXIT_USAGE, "conversion %%%c is not supported", conversion);
    }
    if (end == text || *end != '\0' || errno != 0)
        return cli_fail(EXIT_USAGE, "argument '%s' for %%%c is not a number", text,
                    conversion);
    return 0;
}

static int write_refused(struct coplog *log, int subsys, int level,
                         const char *name)
{
    if (!coplog_wants(log, (unsigned)subsys, (unsigned)level))
        return cli_fail(EXIT_FAILED, "subsystem %s is off or keeps no %s records "
                    "(see coplog stat)", name, coplog_level_name((unsigned)level));
    return cli_fail(EXIT_FAILED, "subsystem %s refused the record: its one-shot "
                "ring is full", name);
}

static int command_write(const char *path, const char *name, char **operands,
                         int count, const struct options *o)
{
    char conversions[COPLOG_MAX_ARGS];
    union coplog_arg args[COPLOG_MAX_ARGS];
    char error[COPLOG_ERROR_MAX];
    int level = o->level ? coplog_level_parse(o->level) : COPLOG_TERSE;
    unsigned wanted;
    struct coplog *log;
    int subsys, status = 0;

    if (level < 0)
        return cli_fail(EXIT_USAGE, "level '%s' is not error, warning, terse, "
                    "verbose, prolog or 1-5", o->level);
    if (count < 1)
        return cli_fail(EXIT_USAGE, "write needs a FORMAT");
    wanted = message_conversions(operands[0], conversions, COPLOG_MAX_ARGS);
    if (wanted > COPLOG_MAX_ARGS)
        return cli_fail(EXIT_USAGE, "format '%s' has %u conversions: a record "
                    "holds at most %d arguments", operands[0], wanted,
                    COPLOG_MAX_ARGS);
    if (wanted != (unsigned)count - 1)
        return cli_fail(EXIT_USAGE, "format '%s' takes %u arguments, %d given",
                    operands[0], wanted, count - 1);
    for (unsigned i = 0; i < wanted; i++)
        if (convert_arg(operands[i + 1], conversions[i], &args[i]) != 0)
            return EXIT_USAGE;
    if ((log = coplog_open(path, error)) == NULL)
        return cli_fail(EXIT_FAILED, "%s", error);
    if ((subsys = coplog_subsys(log, name)) < 0)
        status = cli_fail(EXIT_USAGE, "%s: no subsystem '%s'", path, name);
    else if (coplog_write_array(log, (unsigned)subsys, (unsigned)level,
                                operands[0], args, wanted) == 0)
        status = write_refused(log, subsys, level, name);
    coplog_close(log);
    return status;
}

/* ------------------------------------------------------------ main */

static int run(const char *command, int argc, char **argv)
{
    struct options o;
    int status = parse_options(argc, argv, command, &o);
    int operands = argc - optind;
    char **operand = argv + optind;

    if (status != 0)
        return status;
    if (operands < 1)
        return cli_fail(EXIT_USAGE, "%s needs a FILE; see coplog %s --help",
                    command, command);
    if (strcmp(command, "dump") == 0 && operands == 1)
        return command_dump(operand[0], &o);
    if (strcmp(command, "tail") == 0 && operands == 1)
        return command_tail(operand[0], &o);
    if (strcmp(command, "stat") == 0 && operands == 1)
        return command_stat(operand[0], &o);
    if (strcmp(command, "set") == 0 && operands == 3)
        return command_set(operand[0], operand[1], operand[2]);
    if (strcmp(command, "create") == 0)
        return command_create(operand[0], operand + 1, operands - 1, &o);
    if (strcmp(command, "write") == 0 && operands >= 2)
        return command_write(operand[0], operand[1], operand + 2,
                             operands - 2, &o);
    return cli_fail(EXIT_USAGE, "wrong operands for %s; see coplog %s --help",
                command, command);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return cli_fail(EXIT_USAGE, "a command is needed; see coplog --help");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_manual();
        return 0;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(argv[1], command_docs[i].name) == 0)
            return run(argv[1], argc - 1, argv + 1);
    return cli_fail(EXIT_USAGE, "'%s' is not a command (dump, tail, stat, set, "
                "create, write); see coplog --help", argv[1]);
}
