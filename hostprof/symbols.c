/*
 * symbols.c — naming host addresses with libdwfl (symbols.h).
 *
 * A Dwfl per process, made on first use from its mmap records; a load
 * bias per file from the mapping of its executable segment: the file
 * offset pgoff mapped at start lies in the PT_LOAD whose file range holds
 * it, so the bias is start - (p_vaddr - p_offset + pgoff), page aligned.
 * Locations are interned by their text (file, symbol, offset, inlined
 * function, line), so a location row is shared by every address that
 * names the same place.
 */
#include "hostprof/symbols.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct symbolizer {
    struct hostprof *hp;
    GHashTable *dwfls;          /* pid -> Dwfl * (NULL: none) */
    GHashTable *places;         /* "pid:ip" -> location + 1 */
    GHashTable *interned;       /* location text -> location + 1 */
};

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* The load bias of path mapped at start from file offset pgoff. */
static int load_bias(const char *path, uint64_t start, uint64_t pgoff,
                     uint64_t *bias)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), found = -1;
    size_t phnum = 0;
    Elf *elf;

    if (fd < 0)
        return -1;
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (elf && elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; i < phnum && found < 0; i++) {
            GElf_Phdr ph;
            uint64_t page_off;

            if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
                continue;
            page_off = ph.p_offset & ~(uint64_t)4095;
            if (pgoff < page_off || pgoff >= ph.p_offset + ph.p_filesz)
                continue;
            *bias = start - ((ph.p_vaddr & ~(uint64_t)4095) +
                             (pgoff - page_off));
            found = 0;
        }
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return found;
}

/* The process whose mappings pid uses: itself, or the parent it forked
 * from without exec'ing. */
static pid_t mapped_process(struct hostprof *hp, pid_t pid)
{
    for (int depth = 0; depth < 64; depth++) {
        int has = 0;

        for (size_t i = 0; i < hp->maps.n && !has; i++)
            has = VEC_AT(&hp->maps, struct host_map, i)->pid == pid;
        if (has)
            return pid;
        for (size_t i = 0; i < hp->forks.n; i++) {
            struct host_fork *f = VEC_AT(&hp->forks, struct host_fork, i);

            if (f->pid == pid) {
                pid = f->ppid;
                break;
            }
        }
    }
    return pid;
}

static int already_reported(struct hostprof *hp, size_t upto, pid_t pid,
                            const char *path)
{
    for (size_t i = 0; i < upto; i++) {
        struct host_map *m = VEC_AT(&hp->maps, struct host_map, i);

        if (m->pid == pid && m->path && strcmp(m->path, path) == 0)
            return 1;
    }
    return 0;
}

static Dwfl *make_dwfl(struct hostprof *hp, pid_t pid)
{
    Dwfl *dwfl = dwfl_begin(&callbacks);

    if (!dwfl)
        return NULL;
    dwfl_report_begin(dwfl);
    for (size_t i = 0; i < hp->maps.n; i++) {
        struct host_map *m = VEC_AT(&hp->maps, struct host_map, i);
        uint64_t bias;

        if (m->pid != pid || !m->path || m->path[0] != '/' ||
            already_reported(hp, i, pid, m->path) ||
            load_bias(m->path, m->start, m->pgoff, &bias) < 0)
            continue;
        dwfl_report_elf(dwfl, m->path, m->path, -1, bias, true);
    }
    dwfl_report_end(dwfl, NULL, NULL);
    return dwfl;
}

static Dwfl *dwfl_of(struct symbolizer *z, pid_t pid)
{
    gpointer key = GINT_TO_POINTER(mapped_process(z->hp, pid));
    Dwfl *dwfl;

    if (g_hash_table_contains(z->dwfls, key))
        return g_hash_table_lookup(z->dwfls, key);
    dwfl = make_dwfl(z->hp, GPOINTER_TO_INT(key));
    g_hash_table_insert(z->dwfls, key, dwfl);
    return dwfl;
}

/* The mapping of pid (or its parent's) that covers ip, or NULL. */
static struct host_map *map_at(struct hostprof *hp, pid_t pid, uint64_t ip)
{
    pid = mapped_process(hp, pid);
    for (size_t i = hp->maps.n; i-- > 0;) {
        struct host_map *m = VEC_AT(&hp->maps, struct host_map, i);

        if (m->pid == pid && ip >= m->start && ip - m->start < m->len)
            return m;
    }
    return NULL;
}

/* The innermost inlined function at addr, or NULL. */
static const char *inlined_at(Dwfl_Module *mod, Dwarf_Addr addr)
{
    Dwarf_Addr bias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias), *scopes = NULL;
    const char *name = NULL;
    int n;

    if (!cu)
        return NULL;
    n = dwarf_getscopes(cu, addr - bias, &scopes);
    for (int i = 0; i < n && !name; i++)
        if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine)
            name = dwarf_diename(&scopes[i]);
    free(scopes);
    return name;
}

static char *build_id_of(Dwfl_Module *mod)
{
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    char *hex;

    if (len <= 0 || !(hex = malloc((size_t)len * 2 + 1)))
        return NULL;
    for (int i = 0; i < len; i++)
        sprintf(hex + i * 2, "%02x", bits[i]);
    return hex;
}

static void describe(Dwfl *dwfl, struct host_map *map, uint64_t ip,
                     struct host_location *l)
{
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, ip) : NULL;
    const char *file = NULL, *sym = NULL;
    GElf_Off offset = 0;
    GElf_Sym elfsym;
    Dwfl_Line *line;

    if (mod) {
        dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &file, NULL);
        sym = dwfl_module_addrinfo(mod, ip, &offset, &elfsym, NULL, NULL,
                                   NULL);
        l->build_id = build_id_of(mod);
        if (inlined_at(mod, ip))
            l->inlined = strdup(inlined_at(mod, ip));
        if ((line = dwfl_module_getsrc(mod, ip)) != NULL) {
            const char *src = dwfl_lineinfo(line, NULL, &l->line, NULL,
                                            NULL, NULL);

            l->source = src ? strdup(src) : NULL;
        }
    }
    if (!file)
        file = map && map->path ? map->path : "[unknown]";
    l->file = strdup(file);
    l->symbol = sym ? strdup(sym) : NULL;
    l->offset = sym ? offset : (map ? ip - map->start + map->pgoff : ip);
}

static void free_location(struct host_location *l)
{
    free(l->file);
    free(l->build_id);
    free(l->symbol);
    free(l->inlined);
    free(l->source);
}

/* The index of the location of ip in pid, interned; -1 when out of
 * memory. */
static int locate(struct symbolizer *z, pid_t pid, uint64_t ip)
{
    char key[64], *text;
    struct host_location l, *row;
    gpointer found;

    snprintf(key, sizeof(key), "%d:%" PRIx64, (int)mapped_process(z->hp,
             pid), ip);
    if ((found = g_hash_table_lookup(z->places, key)) != NULL)
        return GPOINTER_TO_INT(found) - 1;
    memset(&l, 0, sizeof(l));
    describe(dwfl_of(z, pid), map_at(z->hp, pid, ip), ip, &l);
    text = g_strdup_printf("%s\n%s\n%" PRIx64 "\n%s\n%s:%d", l.file,
                           l.symbol ? l.symbol : "", l.offset,
                           l.inlined ? l.inlined : "",
                           l.source ? l.source : "", l.line);
    if ((found = g_hash_table_lookup(z->interned, text)) != NULL) {
        free_location(&l);
        g_free(text);
    } else {
        if (!(row = vec_push(&z->hp->locations))) {
            free_location(&l);
            g_free(text);
            return -1;
        }
        *row = l;
        found = GINT_TO_POINTER((int)z->hp->locations.n);
        g_hash_table_insert(z->interned, text, found);
    }
    g_hash_table_insert(z->places, g_strdup(key), found);
    return GPOINTER_TO_INT(found) - 1;
}

static void end_dwfl(gpointer dwfl)
{
    if (dwfl)
        dwfl_end(dwfl);
}

int host_symbolize(struct hostprof *hp, int **chain_locations)
{
    struct symbolizer z = {hp, NULL, NULL, NULL};
    int *chain = calloc(hp->chain.n + 1, sizeof(int)), rc = 0;

    if (!chain)
        return -1;
    elf_version(EV_CURRENT);
    z.dwfls = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL,
                                    end_dwfl);
    z.places = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    z.interned = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                       NULL);
    for (size_t i = 0; i < hp->samples.n && rc == 0; i++) {
        struct host_sample *s = VEC_AT(&hp->samples, struct host_sample, i);

        s->location = locate(&z, s->pid, s->ip);
        for (size_t j = 0; j < s->chain_len && rc == 0; j++) {
            uint64_t ip = *VEC_AT(&hp->chain, uint64_t, s->chain_off + j);

            /* a return address: the call is just before it */
            chain[s->chain_off + j] = locate(&z, s->pid, j && ip ? ip - 1 : ip);
            rc = chain[s->chain_off + j] < 0 ? -1 : 0;
        }
        rc = s->location < 0 ? -1 : rc;
    }
    g_hash_table_destroy(z.places);
    g_hash_table_destroy(z.interned);
    g_hash_table_destroy(z.dwfls);
    *chain_locations = chain;
    return rc;
}
