/*
 * coplfsr — compute trace-unit LFSR values from the command line.
 *
 *   coplfsr N                    the value for one capture every N cycles
 *   coplfsr --inverse 0xV        the count of cycles a value stands for
 *   coplfsr --period 50us --clock-hz 1e9 [--fifo-depth 1024]
 *   coplfsr --frequency 20kHz --clock-hz 1e9 [--fifo-depth 1024]
 *                                count, value and poll interval for a rate
 *
 * Bad input prints one line on stderr naming the value and the valid range,
 * and exits with status 2.
 */
#include "lfsr/lfsr.h"
#include "common/cli.h"

#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define EXIT_USAGE 2
#define DEFAULT_FIFO_DEPTH 4096    /* the trace unit's default */

static void usage(FILE *out)
{
    fprintf(out,
        "usage: coplfsr N\n"
        "       coplfsr --inverse VALUE\n"
        "       coplfsr (--period TIME | --frequency HZ) --clock-hz HZ [--fifo-depth D]\n"
        "\n"
        "Computes the value to program into the trace unit's 24-bit LFSR for one\n"
        "PC capture every N cycles (N from 1 to %u), exactly.\n"
        "\n"
        "  N                   print the LFSR value as 0xVVVVVV\n"
        "  -i, --inverse V     print the count N that value V (0x hex or decimal,\n"
        "                      0x000001 to 0xffffff) stands for\n"
        "  -p, --period TIME   sample period with unit ns, us, ms or s (e.g. 50us)\n"
        "  -f, --frequency HZ  sample frequency, e.g. 20kHz\n"
        "  -c, --clock-hz HZ   coprocessor clock, e.g. 1e9 or 1GHz\n"
        "  -d, --fifo-depth D  trace FIFO entries, for the poll interval (default %u)\n"
        "  -h, --help          show this help\n"
        "\n"
        "With a period or frequency it prints count=N value=0xV period_ns=P\n"
        "error_ppm=E poll_interval_ns=I: the count rounded to the nearest cycle,\n"
        "the period that count gives, its error against the request, and the\n"
        "poll interval that drains the FIFO when it is at most 1/%d full.\n",
        LFSR_PERIOD, DEFAULT_FIFO_DEPTH, LFSR_POLL_MARGIN);
}

static int print_value(const char *text)
{
    uint64_t count;

    if (lfsr_parse_count(text, &count) != 0)
        return cli_fail(EXIT_USAGE, "count '%s' is not a number: valid counts are 1 to %u",
                    text, LFSR_PERIOD);
    if (count < 1 || count > LFSR_PERIOD)
        return cli_fail(EXIT_USAGE, "count %s is out of range: valid counts are 1 to %u",
                    text, LFSR_PERIOD);
    printf("0x%06" PRIx32 "\n", lfsr_value_for_count((uint32_t)count));
    return 0;
}

static int print_count(const char *text)
{
    uint64_t value;

    if (lfsr_parse_value(text, &value) != 0)
        return cli_fail(EXIT_USAGE, "value '%s' is not a number: valid values are 0x000001 "
                    "to 0xffffff", text);
    if (value < 1 || value > LFSR_MASK)
        return cli_fail(EXIT_USAGE, "value %s is out of range: valid values are 0x000001 to "
                    "0xffffff (0 disables capture and has no count)", text);
    printf("%" PRIu32 "\n", lfsr_count_for_value((uint32_t)value));
    return 0;
}

static int print_rate(const char *period, const char *frequency,
                      const char *clock, const char *depth_text)
{
    double clock_hz, seconds, hz;
    uint64_t depth = DEFAULT_FIFO_DEPTH;
    uint32_t count;

    if (clock == NULL)
        return cli_fail(EXIT_USAGE, "--clock-hz is needed to turn a period or frequency "
                    "into cycles");
    if (lfsr_parse_hz(clock, &clock_hz) != 0 || !(clock_hz > 0))
        return cli_fail(EXIT_USAGE, "clock '%s' is not a positive frequency such as 1e9 or "
                    "800MHz", clock);
    if (depth_text && lfsr_parse_count(depth_text, &depth) != 0)
        return cli_fail(EXIT_USAGE, "FIFO depth '%s' is not a number: valid depths are 1 to "
                    "%u", depth_text, UINT32_MAX);
    if (depth_text && (depth < 1 || depth > UINT32_MAX))
        return cli_fail(EXIT_USAGE, "FIFO depth '%s' is out of range: valid depths are 1 to "
                    "%u", depth_text, UINT32_MAX);

    double min_s = 1 / clock_hz, max_s = LFSR_PERIOD / clock_hz;
    if (period) {
        if (lfsr_parse_seconds(period, &seconds) != 0)
            return cli_fail(EXIT_USAGE, "period '%s' is not a time such as 50us (units ns, "
                        "us, ms, s)", period);
        if (lfsr_count_for_period(seconds, clock_hz, &count) != 0)
            return cli_fail(EXIT_USAGE, "period %s is out of range: at %g Hz valid periods "
                        "are %gs to %gs (1 to %u cycles)", period, clock_hz,
                        min_s, max_s, LFSR_PERIOD);
    } else {
        if (lfsr_parse_hz(frequency, &hz) != 0)
            return cli_fail(EXIT_USAGE, "frequency '%s' is not a frequency such as 20kHz",
                        frequency);
        if (lfsr_count_for_frequency(hz, clock_hz, &count) != 0)
            return cli_fail(EXIT_USAGE, "frequency %s is out of range: at %g Hz valid "
                        "frequencies are %gHz to %gHz (1 to %u cycles)",
                        frequency, clock_hz, 1 / max_s, 1 / min_s,
                        LFSR_PERIOD);
        seconds = 1 / hz;
    }

    double actual_s = count / clock_hz;
    printf("count=%" PRIu32 " value=0x%06" PRIx32 " period_ns=%.3f "
           "error_ppm=%.3f poll_interval_ns=%" PRIu64 "\n",
           count, lfsr_value_for_count(count), actual_s * 1e9,
           (actual_s - seconds) / seconds * 1e6,
           lfsr_poll_interval_ns(count, clock_hz, (uint32_t)depth));
    return 0;
}

int main(int argc, char **argv)
{
    static const struct cli_option options[] = {
        { 'i', "inverse", required_argument, 0 },
        { 'p', "period", required_argument, 0 },
        { 'f', "frequency", required_argument, 0 },
        { 'c', "clock-hz", required_argument, 0 },
        { 'd', "fifo-depth", required_argument, 0 },
        { 'h', "help", no_argument, 0 },
        CLI_END,
    };
    const char *inverse = NULL, *period = NULL, *frequency = NULL;
    const char *clock = NULL, *depth = NULL;
    struct cli_parser parser;
    int opt;

    /* A negative count is an operand to reject, not an option. */
    if (argc == 2 && argv[1][0] == '-' && isdigit((unsigned char)argv[1][1]))
        return print_value(argv[1]);

    cli_parser_init(&parser, options, "+");
    while ((opt = cli_next(&parser, argc, argv)) != -1) {
        switch (opt) {
        case 'i': inverse = optarg; break;
        case 'p': period = optarg; break;
        case 'f': frequency = optarg; break;
        case 'c': clock = optarg; break;
        case 'd': depth = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }

    int operands = argc - optind;
    int modes = (operands > 0) + (inverse != NULL) +
                (period != NULL || frequency != NULL);
    if (modes != 1 || operands > 1 || (period && frequency)) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (operands == 1)
        return print_value(argv[optind]);
    if (inverse)
        return print_count(inverse);
    return print_rate(period, frequency, clock, depth);
}
