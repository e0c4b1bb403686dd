/*
 * copovl — inspect a coprocessor image and resolve local-store addresses
 * from the command line, with the overlay/ library.
 *
 *   copovl info [--offset N] [--size N] IMAGE
 *       segments, overlay regions (with their guard words), overlays
 *   copovl resolve [--offset N] [--size N] [--guards G1,G2,...] IMAGE [LS...]
 *       one line per LS address (from the arguments, or one per line on
 *       standard input): where it lies under that guard state
 *   copovl candidates [--offset N] [--size N] IMAGE LS...
 *       every location the address could have, whatever the guard state
 *
 * An image that cannot be read prints one line "copovl: IMAGE: reason" and
 * exits with status 1; bad arguments exit with status 2.
 */
#include "overlay/overlay.h"
#include "common/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_IMAGE 1
#define EXIT_USAGE 2
#define MAX_GUARDS 4096

struct options {
    const char *command;
    const char *path;
    uint64_t offset;
    uint64_t size;
    uint32_t guards[MAX_GUARDS];
    unsigned guard_count;
    char **addresses;
    int address_count;
};

static void usage(FILE *out)
{
    fprintf(out,
        "usage: copovl info [OPTIONS] IMAGE\n"
        "       copovl resolve [OPTIONS] [--guards G1,G2,...] IMAGE [LS...]\n"
        "       copovl candidates [OPTIONS] IMAGE LS...\n"
        "\n"
        "Reads a coprocessor ELF image (RV32, overlays in the SPU toolchain's\n"
        "convention) and resolves local-store (LS) addresses, 0 to 0x%x, to\n"
        "positions in the image file through its load segments and overlays.\n"
        "\n"
        "  info          list the resident load segments, the overlay regions\n"
        "                with the LS address of each guard word, and the\n"
        "                overlays\n"
        "  resolve       print where each LS address lies when the guard word\n"
        "                of region r holds the r-th value of --guards; with no\n"
        "                LS argument, read one address per line from stdin\n"
        "  candidates    print every location an LS address could have, for\n"
        "                a sample taken while its region's guard changed\n"
        "\n"
        "  -o, --offset N    the image starts N bytes into the file (an image\n"
        "                    embedded in a host executable); default 0\n"
        "  -s, --size N      the image is N bytes long; default: derived from\n"
        "                    its ELF headers\n"
        "  -g, --guards LIST comma-separated guard values, region 1 first;\n"
        "                    regions not listed are unknown\n"
        "  -h, --help        show this help\n"
        "\n"
        "Numbers are decimal or 0x hexadecimal.  resolve prints, per address,\n"
        "  LS mapped file_offset=F vaddr=V region=R overlay=O section=S symbol=N+D\n"
        "  LS unmapped reason=WHY vaddr=V [region=R guard=G]\n"
        "where overlay 0 is resident code and WHY is one of outside-ls,\n"
        "no-segment, no-file-bytes, region-empty, guard-unknown,\n"
        "guard-invalid, outside-overlay (overlay/README.md explains them).\n",
        COP_LS_SIZE - 1);
}

static int parse_number(const char *text, uint64_t *value)
{
    int hex = text[0] == '0' && (text[1] == 'x' || text[1] == 'X');
    const char *digits = hex ? text + 2 : text;
    char *end;

    if (!isxdigit((unsigned char)digits[0]))
        return -1;
    errno = 0;
    *value = strtoull(digits, &end, hex ? 16 : 10);
    return errno == 0 && end != digits && *end == '\0' ? 0 : -1;
}

static int parse_guards(const char *text, struct options *options)
{
    char *copy = strdup(text), *rest = copy, *item;
    int status = 0;

    if (copy == NULL)
        return -1;
    options->guard_count = 0;
    while (status == 0 && (item = strsep(&rest, ",")) != NULL) {
        uint64_t value;
        if (options->guard_count == MAX_GUARDS ||
            parse_number(item, &value) != 0 || value > UINT32_MAX)
            status = -1;
        else
            options->guards[options->guard_count++] = (uint32_t)value;
    }
    free(copy);
    return status;
}

static int parse_options(int argc, char **argv, struct options *options)
{
    static const struct cli_option long_options[] = {
        { 'o', "offset", required_argument, 0 },
        { 's', "size", required_argument, 0 },
        { 'g', "guards", required_argument, 0 },
        { 'h', "help", no_argument, 0 },
        CLI_END,
    };
    struct cli_parser parser;
    int opt;

    cli_parser_init(&parser, long_options, "+");
    while ((opt = cli_next(&parser, argc, argv)) != -1) {
        switch (opt) {
        case 'o':
            if (parse_number(optarg, &options->offset) != 0)
                return cli_fail(EXIT_USAGE, "offset '%s' is not a number",
                                optarg);
            break;
        case 's':
            if (parse_number(optarg, &options->size) != 0 ||
                options->size == 0)
                return cli_fail(EXIT_USAGE, "size '%s' is not a positive "
                                "number", optarg);
            break;
        case 'g':
            if (parse_guards(optarg, options) != 0)
                return cli_fail(EXIT_USAGE, "guards '%s' are not a list of "
                                "at most %d numbers of 32 bits, such as "
                                "1,0,2", optarg, MAX_GUARDS);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc)
        return cli_fail(EXIT_USAGE, "no IMAGE given (see --help)");
    options->path = argv[optind];
    options->addresses = argv + optind + 1;
    options->address_count = argc - optind - 1;
    return 0;
}

static const char *flags_text(uint32_t flags, char text[4])
{
    text[0] = flags & 4 ? 'r' : '-';
    text[1] = flags & 2 ? 'w' : '-';
    text[2] = flags & 1 ? 'x' : '-';
    text[3] = '\0';
    return text;
}

static int print_info(const struct ovl_image *image)
{
    char flags[4];

    const char *name = ovl_image_short_name(image);

    printf("image %s offset=0x%" PRIx64 " size=%" PRIu64 " name=%s\n",
           ovl_image_label(image), ovl_image_container_offset(image),
           ovl_image_size(image), name ? name : "-");
    for (unsigned i = 0; i < ovl_image_segment_count(image); i++) {
        const struct ovl_segment *s = ovl_image_segment(image, i);
        printf("segment %u vaddr=0x%08" PRIx32 " memsz=0x%" PRIx32
               " filesz=0x%" PRIx32 " file_offset=0x%" PRIx64 " flags=%s\n",
               s->program_header, s->vaddr, s->memsz, s->filesz,
               s->file_offset, flags_text(s->flags, flags));
    }
    for (unsigned r = 1; r <= ovl_image_region_count(image); r++) {
        const struct ovl_region *region = ovl_image_region(image, r);
        printf("region %u ls=0x%05" PRIx32 "-0x%05" PRIx32 " guard=0x%05"
               PRIx32 " overlays=%u\n", r, region->ls_start, region->ls_end,
               region->guard_ls_addr, region->overlay_count);
    }
    for (unsigned i = 1; i <= ovl_image_overlay_count(image); i++) {
        const struct ovl_overlay *o = ovl_image_overlay(image, i);
        printf("overlay %u region=%u vaddr=0x%08" PRIx32 " size=0x%" PRIx32
               " file_offset=0x%" PRIx64 " section=%s\n", i, o->region,
               o->vaddr, o->size, o->file_offset,
               o->section ? o->section : "-");
    }
    return 0;
}

static void print_location(const struct ovl_location *location)
{
    struct ovl_symbol symbol;

    printf("0x%05" PRIx32 " ", location->ls_addr);
    if (location->reason != OVL_MAPPED) {
        printf("unmapped reason=%s vaddr=0x%08" PRIx32,
               ovl_reason_name(location->reason), location->vaddr);
        if (location->region)
            printf(" region=%u", location->region);
        if (location->region && location->reason != OVL_GUARD_UNKNOWN)
            printf(" guard=%" PRIu32, location->guard);
        putchar('\n');
        return;
    }
    printf("mapped file_offset=0x%" PRIx64 " vaddr=0x%08" PRIx32
           " region=%u overlay=%u section=%s", location->file_offset,
           location->vaddr, location->region, location->overlay,
           location->section ? location->section : "-");
    if (ovl_symbol_at(location->image, location->file_offset, &symbol) == 0)
        printf(" symbol=%s+0x%" PRIx64, symbol.name,
               location->file_offset - symbol.file_offset);
    else
        printf(" symbol=-");
    putchar('\n');
}

static int parse_ls(const char *text, uint32_t *ls_addr)
{
    uint64_t value;

    if (parse_number(text, &value) != 0 || value > UINT32_MAX) {
        cli_fail(EXIT_USAGE, "LS address '%s' is not a 32-bit number",
                 text);
        return -1;
    }
    *ls_addr = (uint32_t)value;
    return 0;
}

static int resolve_one(const struct ovl_image *image,
                       const struct options *options, const char *text)
{
    struct ovl_location location;
    uint32_t ls_addr;

    if (parse_ls(text, &ls_addr) != 0)
        return EXIT_USAGE;
    ovl_resolve(image, ls_addr, options->guards, options->guard_count,
                &location);
    print_location(&location);
    return 0;
}

static int resolve_stdin(const struct ovl_image *image,
                         const struct options *options)
{
    char line[128];

    while (fgets(line, sizeof line, stdin) != NULL) {
        line[strcspn(line, " \t\r\n")] = '\0';
        if (line[0] != '\0' && resolve_one(image, options, line) != 0)
            return EXIT_USAGE;
    }
    return 0;
}

static int print_resolved(const struct ovl_image *image,
                          const struct options *options)
{
    if (options->address_count == 0)
        return resolve_stdin(image, options);
    for (int i = 0; i < options->address_count; i++)
        if (resolve_one(image, options, options->addresses[i]) != 0)
            return EXIT_USAGE;
    return 0;
}

static int print_candidates(const struct ovl_image *image,
                            const struct options *options)
{
    struct ovl_location found[64];
    uint32_t ls_addr;

    if (options->address_count == 0)
        return cli_fail(EXIT_USAGE, "candidates needs at least one LS "
                        "address");
    for (int i = 0; i < options->address_count; i++) {
        if (parse_ls(options->addresses[i], &ls_addr) != 0)
            return EXIT_USAGE;
        size_t count = ovl_candidates(image, ls_addr, found, 64);
        printf("0x%05" PRIx32 " candidates=%zu\n", ls_addr, count);
        for (size_t c = 0; c < count && c < 64; c++) {
            fputs("  ", stdout);
            print_location(&found[c]);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static struct options options;
    struct ovl_error error;

    if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "-h") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : 0;
    }
    options.command = argv[1];
    if (strcmp(options.command, "info") != 0 &&
        strcmp(options.command, "resolve") != 0 &&
        strcmp(options.command, "candidates") != 0)
        return cli_fail(EXIT_USAGE, "unknown command '%s': use info, "
                        "resolve or candidates", options.command);
    int status = parse_options(argc - 1, argv + 1, &options);
    if (status != 0)
        return status;

    struct ovl_image *image = ovl_image_open_at(options.path, options.offset,
                                                options.size, &error);
    if (image == NULL)
        return cli_fail(EXIT_IMAGE, "%s", error.message);
    if (strcmp(options.command, "info") == 0 && options.address_count > 0)
        status = cli_fail(EXIT_USAGE, "info takes no LS address");
    else if (strcmp(options.command, "info") == 0)
        status = print_info(image);
    else if (strcmp(options.command, "resolve") == 0)
        status = print_resolved(image, &options);
    else
        status = print_candidates(image, &options);
    ovl_image_close(image);
    if (fflush(stdout) != 0)
        return cli_fail(EXIT_IMAGE, "cannot write the output");
    return status;
}
