/*
 * events.c — --list-events (events.h).
 *
 * The coprocessor's events come first, SPU_CYCLES (modelled cycles) and
 * SPU_INSTRUCTIONS (retired instructions), with the N that rate.c accepts
 * at the clock and FIFO depth given (the smallest N is the poll floor's).  Then the host:
 * libpfm4's PMUs that are present on this machine (pfm_get_pmu_info's
 * is_present), each with its events (pfm_get_event_next from the PMU's
 * first event, pfm_get_event_info for the name and description), as
 * PMU::EVENT lines like perf's and OProfile's listings.  libpfm4 judges
 * a core PMU present from the CPU model alone, so a virtual machine that
 * hides the PMU from its kernel still "has" one: a core PMU is listed only
 * when the kernel exposes a core PMU too (a device of type PERF_TYPE_RAW in
 * /sys/bus/event_source/devices: cpu, cpu_core, cpu_atom, armv8_*).  A
 * hardware CPU PMU is exactly that, a core PMU both know: uncore PMUs
 * (rapl, the memory controllers) that a VM still shows count no samples
 * of the CPU, so a host without a core PMU says so in a line, whatever
 * else it lists.
 */
#include "control/events.h"

#include "control/rate.h"
#include "lfsr/lfsr.h"

#include <dirent.h>
#include <linux/perf_event.h>
#include <perfmon/pfmlib.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_SOURCES "/sys/bus/event_source/devices"

static void list_spu_cycles(FILE *out, double clock_hz, uint32_t fifo_depth,
                            int from_copsim)
{
    uint32_t min = lfsr_min_count(clock_hz, fifo_depth);
    char clock[32], high[32], low[32];

    rate_format_hz(clock_hz, clock, sizeof(clock));
    rate_format_hz(min ? clock_hz / min : 0, high, sizeof(high));
    rate_format_hz(clock_hz / LFSR_PERIOD, low, sizeof(low));
    fprintf(out, "Coprocessor events (copsim%s: nominal clock %s, %u-entry "
            "FIFO):\n", from_copsim ? "" : "'s defaults, none runs", clock,
            fifo_depth);
    fprintf(out, "  %s:N  one sample every N slot cycles (modelled "
            "cycles: the timing model's, stalls included); N in %u..%u "
            "(%s..%s per slot); the LFSR takes 1..%u, a smaller N needs a "
            "deeper FIFO (copsim --fifo-depth)\n",
            RATE_EVENT_NAME, min, LFSR_PERIOD, low, high, LFSR_PERIOD);
    fprintf(out, "  %s:N  one sample every N retired instructions of a "
            "slot; N in %u..%u, as %s\n", RATE_INSTRUCTIONS_NAME, min,
            LFSR_PERIOD, RATE_EVENT_NAME);
}

/* The events of one present PMU; returns how many were listed. */
static int list_pmu(FILE *out, const pfm_pmu_info_t *pmu)
{
    int listed = 0;

    fprintf(out, "  PMU %s (%s), %d events:\n", pmu->name, pmu->desc,
            pmu->nevents);
    for (int i = pmu->first_event; i != -1; i = pfm_get_event_next(i)) {
        pfm_event_info_t info;

        memset(&info, 0, sizeof(info));
        info.size = sizeof(info);
        if (pfm_get_event_info(i, PFM_OS_NONE, &info) != PFM_SUCCESS)
            continue;
        fprintf(out, "    %s::%s%s%s\n", pmu->name, info.name,
                info.desc && *info.desc ? "  " : "",
                info.desc ? info.desc : "");
        listed++;
    }
    return listed;
}

/* The perf type number of the event source NAME, or -1. */
static long event_source_type(const char *name)
{
    char path[512];
    FILE *f;
    long type = -1;

    snprintf(path, sizeof(path), EVENT_SOURCES "/%s/type", name);
    f = fopen(path, "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld", &type) != 1)
        type = -1;
    fclose(f);
    return type;
}

/* Does the kernel expose a core PMU (hardware events) to perf? */
static int kernel_has_core_pmu(void)
{
    DIR *dir = opendir(EVENT_SOURCES);
    struct dirent *e;
    int found = 0;

    if (!dir)
        return 0;
    while (!found && (e = readdir(dir)) != NULL)
        found = e->d_name[0] != '.' &&
                event_source_type(e->d_name) == PERF_TYPE_RAW;
    closedir(dir);
    return found;
}

static int list_host(FILE *out)
{
    int status = pfm_initialize(), pmus = 0, cpu_pmus = 0;
    int core_pmu = kernel_has_core_pmu();
    pfm_pmu_t p;

    if (status != PFM_SUCCESS) {
        fprintf(out, "Host CPU events: libpfm4 cannot start: %s\n",
                pfm_strerror(status));
        return -1;
    }
    fprintf(out, "Host CPU events (libpfm4, PMUs present on this host):\n");
    pfm_for_all_pmus(p) {
        pfm_pmu_info_t pmu;

        memset(&pmu, 0, sizeof(pmu));
        pmu.size = sizeof(pmu);
        if (pfm_get_pmu_info(p, &pmu) != PFM_SUCCESS || !pmu.is_present)
            continue;
        if (pmu.type == PFM_PMU_TYPE_CORE && !core_pmu)
            continue;           /* the CPU has it, the kernel hides it */
        pmus++;
        if (pmu.type == PFM_PMU_TYPE_CORE)
            cpu_pmus++;
        list_pmu(out, &pmu);
    }
    if (pmus == 0)
        fprintf(out, "  libpfm4 knows no PMU on this host\n");
    else if (cpu_pmus == 0)
        fprintf(out, "  (libpfm4 finds no hardware CPU PMU on this host, "
                "e.g. a virtual machine that hides it: only the kernel's "
                "generic events above)\n");
    pfm_terminate();
    return 0;
}

int events_list(FILE *out, double clock_hz, uint32_t fifo_depth,
                int from_copsim)
{
    list_spu_cycles(out, clock_hz, fifo_depth, from_copsim);
    fprintf(out, "\n");
    return list_host(out);
}
