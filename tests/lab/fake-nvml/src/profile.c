/*
 * Profile files: a small INI dialect (see ../README.md).
 *
 *   # comment            ; comment
 *   description = ...    (top level)
 *   include = NAME       (inlines NAME[.profile] at this point)
 *   [node]               node-wide keys
 *   [gpu]                defaults for every GPU
 *   [gpu.N]              overrides for GPU N
 *
 * Values may use {i} (GPU index) and {i|a,b,c,...} (element i of a list).
 * The last assignment of a key wins, so a profile that includes another
 * overrides it simply by assigning again.
 */
#include "fake.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_INCLUDE_DEPTH 8
#define VAL_MAX 1024

typedef struct entry {
    char sec[32];
    char key[64];
    char *val;
    const char *file;
    int line;
} entry_t;

typedef struct parser {
    entry_t *e;
    unsigned n, cap;
    char *files[64];
    unsigned nfiles;
    int errors;
} parser_t;

static void perr(parser_t *p, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void perr(parser_t *p, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    p->errors++;
    if (file)
        fprintf(stderr, "gpuops-fake-nvml: %s:%d: ", file, line);
    else
        fprintf(stderr, "gpuops-fake-nvml: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static char *trim(char *s)
{
    char *end;
    while (isspace((unsigned char)*s))
        s++;
    end = s + strlen(s);
    while (end > s && isspace((unsigned char)end[-1]))
        *--end = '\0';
    return s;
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src);
}

static int file_readable(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    fclose(f);
    return 1;
}

static char include_root[64]; /* the node root of the profile being parsed */

static int resolve_include(const char *from, const char *name, char *out, size_t len)
{
    char dir[1024], installed[1100];
    const char *slash;
    const char *dirs[2];

    if (name[0] == '/') {
        snprintf(out, len, "%s", name);
        if (file_readable(out))
            return 0;
        snprintf(out, len, "%s.profile", name);
        return file_readable(out) ? 0 : -1;
    }
    slash = strrchr(from, '/');
    if (slash)
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - from), from);
    else
        snprintf(dir, sizeof(dir), ".");
    dirs[0] = dir;
    snprintf(installed, sizeof(installed), "%s/etc/gpuops-fake-nvml/profiles", include_root);
    dirs[1] = installed;
    for (int d = 0; d < 2; d++) {
        snprintf(out, len, "%s/%s.profile", dirs[d], name);
        if (file_readable(out))
            return 0;
        snprintf(out, len, "%s/%s", dirs[d], name);
        if (file_readable(out))
            return 0;
    }
    return -1;
}

static int valid_section(const char *s)
{
    if (!strcmp(s, "node") || !strcmp(s, "gpu"))
        return 1;
    if (!strncmp(s, "gpu.", 4) && s[4]) {
        char *end;
        unsigned long v = strtoul(s + 4, &end, 10);
        return *end == '\0' && isdigit((unsigned char)s[4]) && v < FAKE_MAX_GPUS;
    }
    return 0;
}

/* returns 0, or -1 when the file cannot be opened */
static int parse_file(parser_t *p, const char *path, int depth)
{
    FILE *f;
    char buf[4096];
    char sec[32] = "";
    int line = 0;
    const char *fname;

    f = fopen(path, "r");
    if (!f)
        return -1;
    if (p->nfiles >= sizeof(p->files) / sizeof(p->files[0])) {
        fclose(f);
        perr(p, path, 0, "too many included files");
        return 0;
    }
    fname = p->files[p->nfiles++] = strdup(path);
    while (fgets(buf, sizeof(buf), f)) {
        char *s, *eq, *key, *val;
        line++;
        s = trim(buf);
        if (!*s || *s == '#' || *s == ';')
            continue;
        if (*s == '[') {
            char *end = strchr(s, ']');
            if (!end || end[1] != '\0') {
                perr(p, fname, line, "malformed section header '%s'", s);
                continue;
            }
            *end = '\0';
            s = trim(s + 1);
            if (!valid_section(s)) {
                perr(p, fname, line, "unknown section [%s] (expected [node], [gpu] or [gpu.N])", s);
                continue;
            }
            copy_str(sec, sizeof(sec), s);
            continue;
        }
        eq = strchr(s, '=');
        if (!eq) {
            perr(p, fname, line, "expected 'key = value', got '%s'", s);
            continue;
        }
        *eq = '\0';
        key = trim(s);
        val = trim(eq + 1);
        if (!*key || strlen(key) >= sizeof(p->e[0].key)) {
            perr(p, fname, line, "bad key '%s'", key);
            continue;
        }
        if (!strcmp(key, "include")) {
            char inc[1024];
            if (depth >= MAX_INCLUDE_DEPTH) {
                perr(p, fname, line, "includes nested too deeply");
                continue;
            }
            if (resolve_include(fname, val, inc, sizeof(inc)) != 0 ||
                parse_file(p, inc, depth + 1) != 0)
                perr(p, fname, line, "cannot include '%s'", val);
            continue;
        }
        if (strlen(val) >= VAL_MAX) {
            perr(p, fname, line, "value too long");
            continue;
        }
        if (p->n == p->cap) {
            unsigned ncap = p->cap ? p->cap * 2 : 128;
            entry_t *ne = realloc(p->e, ncap * sizeof(*ne));
            if (!ne) {
                perr(p, fname, line, "out of memory");
                break;
            }
            p->e = ne;
            p->cap = ncap;
        }
        copy_str(p->e[p->n].sec, sizeof(p->e[p->n].sec), sec);
        copy_str(p->e[p->n].key, sizeof(p->e[p->n].key), key);
        p->e[p->n].val = strdup(val);
        p->e[p->n].file = fname;
        p->e[p->n].line = line;
        p->n++;
    }
    fclose(f);
    return 0;
}

static void parser_free(parser_t *p)
{
    for (unsigned i = 0; i < p->n; i++)
        free(p->e[i].val);
    free(p->e);
    for (unsigned i = 0; i < p->nfiles; i++)
        free(p->files[i]);
}

static const entry_t *find(parser_t *p, const char *sec, const char *key)
{
    for (unsigned i = p->n; i-- > 0;)
        if (!strcmp(p->e[i].key, key) && !strcmp(p->e[i].sec, sec))
            return &p->e[i];
    return NULL;
}

/* ---- value access with substitution ---- */

typedef struct ctx {
    parser_t *p;
    int gpu; /* -1: node scope */
} ctx_t;

static const entry_t *lookup(ctx_t *c, const char *key)
{
    const entry_t *e;
    char sec[32];
    if (c->gpu < 0) {
        e = find(c->p, "node", key);
        if (!e && !strcmp(key, "description"))
            e = find(c->p, "", key);
        return e;
    }
    snprintf(sec, sizeof(sec), "gpu.%d", c->gpu);
    e = find(c->p, sec, key);
    return e ? e : find(c->p, "gpu", key);
}

/* expands {i} and {i|a,b,...}; returns 0 or -1 (error reported) */
static int expand(ctx_t *c, const entry_t *e, char *out, size_t len)
{
    const char *s = e->val;
    size_t o = 0;
    int idx = c->gpu < 0 ? 0 : c->gpu;

    while (*s) {
        char tmp[32];
        const char *piece = NULL;
        size_t plen = 0;
        if (!strncmp(s, "{i}", 3)) {
            if (c->gpu < 0) {
                perr(c->p, e->file, e->line, "{i} is only meaningful in [gpu] sections");
                return -1;
            }
            snprintf(tmp, sizeof(tmp), "%d", idx);
            piece = tmp;
            plen = strlen(tmp);
            s += 3;
        } else if (!strncmp(s, "{i|", 3)) {
            const char *end = strchr(s, '}');
            const char *item = s + 3;
            if (!end) {
                perr(c->p, e->file, e->line, "unterminated {i|...}");
                return -1;
            }
            if (c->gpu < 0) {
                perr(c->p, e->file, e->line, "{i|...} is only meaningful in [gpu] sections");
                return -1;
            }
            for (int k = 0; k < idx; k++) {
                const char *comma = memchr(item, ',', (size_t)(end - item));
                if (!comma) {
                    perr(c->p, e->file, e->line, "list for '%s' has no element %d", e->key, idx);
                    return -1;
                }
                item = comma + 1;
            }
            {
                const char *comma = memchr(item, ',', (size_t)(end - item));
                const char *stop = comma ? comma : end;
                while (item < stop && isspace((unsigned char)*item))
                    item++;
                while (stop > item && isspace((unsigned char)stop[-1]))
                    stop--;
                piece = item;
                plen = (size_t)(stop - item);
            }
            s = end + 1;
        } else {
            piece = s;
            plen = 1;
            s++;
        }
        if (o + plen + 1 > len) {
            perr(c->p, e->file, e->line, "value of '%s' too long", e->key);
            return -1;
        }
        memcpy(out + o, piece, plen);
        o += plen;
    }
    out[o] = '\0';
    return 0;
}

/* fetches key; returns 1 found, 0 missing, -1 error */
static int get(ctx_t *c, const char *key, char *out, size_t len, const entry_t **ep)
{
    const entry_t *e = lookup(c, key);
    if (ep)
        *ep = e;
    if (!e)
        return 0;
    return expand(c, e, out, len) == 0 ? 1 : -1;
}

static int where_err(ctx_t *c, const entry_t *e, const char *fmt, const char *val, const char *key)
{
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, val);
    if (c->gpu >= 0)
        perr(c->p, e ? e->file : NULL, e ? e->line : 0, "%s (key '%s', gpu %d)", msg, key, c->gpu);
    else
        perr(c->p, e ? e->file : NULL, e ? e->line : 0, "%s (key '%s')", msg, key);
    return -1;
}

static int get_str(ctx_t *c, const char *key, char *out, size_t len, const char *def)
{
    char buf[VAL_MAX];
    const entry_t *e;
    int r = get(c, key, buf, sizeof(buf), &e);
    if (r < 0)
        return -1;
    if (r == 0) {
        copy_str(out, len, def);
        return 0;
    }
    if (strlen(buf) >= len)
        return where_err(c, e, "value '%s' is too long", buf, key);
    copy_str(out, len, buf);
    return 1;
}

static int parse_ull(const char *s, unsigned long long *v)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    errno = 0;
    *v = strtoull(s, &end, 0);
    return (errno || *end) ? -1 : 0;
}

static int get_ull(ctx_t *c, const char *key, unsigned long long *out, unsigned long long def)
{
    char buf[VAL_MAX];
    const entry_t *e;
    int r = get(c, key, buf, sizeof(buf), &e);
    if (r <= 0) {
        *out = def;
        return r;
    }
    if (parse_ull(buf, out) != 0)
        return where_err(c, e, "'%s' is not a non-negative number", buf, key);
    return 1;
}

static int get_u(ctx_t *c, const char *key, unsigned *out, unsigned def)
{
    unsigned long long v;
    int r = get_ull(c, key, &v, def);
    if (r > 0 && v > 0xFFFFFFFFULL)
        return where_err(c, lookup(c, key), "'%s' is out of range", "value", key);
    *out = (unsigned)v;
    return r;
}

typedef struct word {
    const char *name;
    int value;
} word_t;

static int get_word(ctx_t *c, const char *key, const word_t *words, int *out, int def)
{
    char buf[VAL_MAX];
    const entry_t *e;
    int r = get(c, key, buf, sizeof(buf), &e);
    if (r <= 0) {
        *out = def;
        return r;
    }
    for (const word_t *w = words; w->name; w++)
        if (!strcasecmp(buf, w->name)) {
            *out = w->value;
            return 1;
        }
    return where_err(c, e, "unexpected value '%s'", buf, key);
}

static const word_t bool_words[] = {
    {"true", 1},     {"yes", 1},  {"on", 1},     {"enabled", 1}, {"1", 1},
    {"false", 0},    {"no", 0},   {"off", 0},    {"disabled", 0}, {"0", 0},
    {NULL, 0},
};

/* comma/space separated list items -> callback */
typedef int (*item_fn)(ctx_t *c, const entry_t *e, const char *item, void *arg);

static int get_list(ctx_t *c, const char *key, item_fn fn, void *arg)
{
    char buf[VAL_MAX];
    const entry_t *e;
    char *save = NULL, *tok;
    int r = get(c, key, buf, sizeof(buf), &e);
    if (r <= 0)
        return r;
    for (tok = strtok_r(buf, ", \t", &save); tok; tok = strtok_r(NULL, ", \t", &save))
        if (fn(c, e, tok, arg) != 0)
            return -1;
    return 1;
}

/* ---- specific value types ---- */

static int parse_bus_id(const char *s, unsigned *dom, unsigned *bus, unsigned *dev, unsigned *fn)
{
    char tail;
    if (sscanf(s, "%x:%x:%x.%x%c", dom, bus, dev, fn, &tail) == 4)
        return (*bus <= 0xFF && *dev <= 0x1F && *fn <= 7) ? 0 : -1;
    return -1;
}

static int cpulist_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    unsigned long *mask = arg;
    unsigned a, b;
    char tail;
    if (sscanf(item, "%u-%u%c", &a, &b, &tail) == 2) {
        /* range */
    } else if (sscanf(item, "%u%c", &a, &tail) == 1) {
        b = a;
    } else {
        return where_err(c, e, "bad cpu list item '%s'", item, e->key);
    }
    if (a > b || b >= FAKE_CPUSET_WORDS * 64)
        return where_err(c, e, "cpu range '%s' out of bounds", item, e->key);
    for (unsigned cpu = a; cpu <= b; cpu++)
        mask[cpu / 64] |= 1UL << (cpu % 64);
    return 0;
}

static int xid_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    fake_gpu_t *g = arg;
    unsigned long long v;
    if (parse_ull(item, &v) != 0 || v > 0xFFFF)
        return where_err(c, e, "bad XID '%s'", item, e->key);
    if (g->nxids >= FAKE_MAX_XIDS)
        return where_err(c, e, "too many XIDs (%s)", item, e->key);
    g->xids[g->nxids++] = (unsigned)v;
    return 0;
}

static int link_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    fake_gpu_t *g = arg;
    unsigned long long v;
    if (!strcasecmp(item, "all")) {
        memset(g->nvlink_down, 1, sizeof(g->nvlink_down));
        return 0;
    }
    if (parse_ull(item, &v) != 0 || v >= FAKE_MAX_LINKS)
        return where_err(c, e, "bad NVLink index '%s'", item, e->key);
    g->nvlink_down[v] = 1;
    return 0;
}

static const word_t reason_words[] = {
    {"none", 0x0},
    {"gpu_idle", 0x1},
    {"applications_clocks_setting", 0x2},
    {"sw_power_cap", 0x4},
    {"hw_slowdown", 0x8},
    {"sync_boost", 0x10},
    {"sw_thermal_slowdown", 0x20},
    {"hw_thermal_slowdown", 0x40},
    {"hw_power_brake_slowdown", 0x80},
    {"display_clock_setting", 0x100},
    {NULL, 0},
};

static const word_t event_words[] = {
    {"single_bit_ecc", (int)nvmlEventTypeSingleBitEccError},
    {"double_bit_ecc", (int)nvmlEventTypeDoubleBitEccError},
    {"pstate", (int)nvmlEventTypePState},
    {"xid", (int)nvmlEventTypeXidCriticalError},
    {"clock", (int)nvmlEventTypeClock},
    {"power_source_change", (int)nvmlEventTypePowerSourceChange},
    {NULL, 0},
};

static int mask_item(ctx_t *c, const entry_t *e, const char *item, const word_t *words,
                     unsigned long long *mask)
{
    unsigned long long v;
    for (const word_t *w = words; w->name; w++)
        if (!strcasecmp(item, w->name)) {
            *mask |= (unsigned long long)(unsigned)w->value;
            return 0;
        }
    if (parse_ull(item, &v) == 0) {
        *mask |= v;
        return 0;
    }
    return where_err(c, e, "unknown flag '%s'", item, e->key);
}

static int reason_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    return mask_item(c, e, item, reason_words, arg);
}

static int event_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    return mask_item(c, e, item, event_words, arg);
}

static int switch_item(ctx_t *c, const entry_t *e, const char *item, void *arg)
{
    fake_node_t *n = arg;
    unsigned d, b, v, f;
    if (n->nswitches >= FAKE_MAX_SWITCHES)
        return where_err(c, e, "too many NVSwitches (%s)", item, e->key);
    if (parse_bus_id(item, &d, &b, &v, &f) != 0)
        return where_err(c, e, "bad PCI bus id '%s'", item, e->key);
    n->switch_domain[n->nswitches] = d;
    n->switch_bus[n->nswitches] = b;
    n->switch_dev[n->nswitches] = v;
    n->nswitches++;
    return 0;
}

/* ---- known keys ---- */

static const char *const node_keys[] = {
    "description", "driver_state", "driver_version", "nvml_version", "cuda_driver_version",
    "gpu_count", "uuid_seed", "numa0_cpus", "numa1_cpus", "numa2_cpus", "numa3_cpus",
    "numa4_cpus", "numa5_cpus", "numa6_cpus", "numa7_cpus", "nvswitch_bus_ids",
    "nvswitch_pci_device_id", "p2p_pcie", NULL,
};

static const char *const gpu_keys[] = {
    "name", "uuid", "serial", "board_part_number", "vbios_version", "pci_bus_id",
    "pci_device_id", "pci_subsystem_id", "minor_number", "memory_total_mib",
    "memory_reserved_mib", "memory_used_mib", "compute_capability", "architecture",
    "persistence_mode", "power_usage_mw", "power_limit_mw", "power_management_limit_mw",
    "temperature_gpu", "temperature_shutdown", "temperature_slowdown", "temperature_mem_max",
    "temperature_gpu_max", "clock_graphics", "clock_sm", "clock_mem", "clock_video",
    "max_clock_graphics", "max_clock_sm", "max_clock_mem", "max_clock_video",
    "pcie_gen_current", "pcie_gen_max", "pcie_gen_gpu_max", "pcie_width_current",
    "pcie_width_max", "utilization_gpu", "utilization_memory", "utilization_encoder",
    "utilization_decoder", "energy_consumption_mj", "pcie_replay_counter", "ecc_mode", "ecc_mode_pending",
    "ecc_volatile_corrected", "ecc_volatile_uncorrected", "ecc_aggregate_corrected",
    "ecc_aggregate_uncorrected", "remapped_rows", "remapped_rows_correctable", "brand", "addressing_mode",
    "remapped_rows_uncorrectable", "remapped_rows_pending", "remapped_rows_failure",
    "clocks_event_reasons", "nvlink_count", "nvlink_remote", "nvlink_peer", "nvlink_down",
    "numa_node", "pcie_switch", "supported_events", "xid_events", "lost", "mig_table",
    "mig_mode", "mig_mode_change", "mig_gi_ids", "mig_auto_placement", NULL,
};

static int key_known(const char *const *keys, const char *key)
{
    for (; *keys; keys++)
        if (!strcmp(*keys, key))
            return 1;
    return 0;
}

static void check_keys(parser_t *p)
{
    for (unsigned i = 0; i < p->n; i++) {
        const entry_t *e = &p->e[i];
        int ok;
        if (!e->sec[0])
            ok = !strcmp(e->key, "description");
        else if (!strcmp(e->sec, "node"))
            ok = key_known(node_keys, e->key);
        else
            ok = key_known(gpu_keys, e->key);
        if (!ok)
            perr(p, e->file, e->line, "unknown key '%s' in %s%s%s", e->key,
                 e->sec[0] ? "[" : "top level", e->sec, e->sec[0] ? "]" : "");
    }
}

/* ---- loading ---- */

/* nvmlDeviceGetBrand: data-centre GPUs report NVIDIA (14) on current drivers, RTX workstation
   boards NVIDIA RTX (13) */
static const word_t brand_words[] = {
    {"unknown", NVML_BRAND_UNKNOWN}, {"quadro", NVML_BRAND_QUADRO}, {"tesla", NVML_BRAND_TESLA},
    {"geforce", NVML_BRAND_GEFORCE}, {"titan", NVML_BRAND_TITAN}, {"quadro_rtx", NVML_BRAND_QUADRO_RTX},
    {"nvidia_rtx", NVML_BRAND_NVIDIA_RTX}, {"nvidia", NVML_BRAND_NVIDIA}, {NULL, 0},
};

static const word_t addressing_words[] = {
    {"none", NVML_DEVICE_ADDRESSING_MODE_NONE}, {"hmm", NVML_DEVICE_ADDRESSING_MODE_HMM},
    {"ats", NVML_DEVICE_ADDRESSING_MODE_ATS}, {NULL, 0},
};

static const word_t arch_words[] = {
    {"kepler", NVML_DEVICE_ARCH_KEPLER}, {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
    {"pascal", NVML_DEVICE_ARCH_PASCAL}, {"volta", NVML_DEVICE_ARCH_VOLTA},
    {"turing", NVML_DEVICE_ARCH_TURING}, {"ampere", NVML_DEVICE_ARCH_AMPERE},
    {"ada", NVML_DEVICE_ARCH_ADA},       {"hopper", NVML_DEVICE_ARCH_HOPPER},
    {"blackwell", NVML_DEVICE_ARCH_BLACKWELL}, {NULL, 0},
};

static const word_t p2p_words[] = {
    {"ok", NVML_P2P_STATUS_OK},
    {"chipset_not_supported", NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED},
    {"gpu_not_supported", NVML_P2P_STATUS_GPU_NOT_SUPPORTED},
    {"topology_not_supported", NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED},
    {"disabled_by_regkey", NVML_P2P_STATUS_DISABLED_BY_REGKEY},
    {"not_supported", NVML_P2P_STATUS_NOT_SUPPORTED},
    {NULL, 0},
};

static int load_gpu(parser_t *p, fake_node_t *n, const char *seed, int i)
{
    ctx_t c = {p, i};
    fake_gpu_t *g = &n->gpus[i];
    char buf[VAL_MAX];
    const entry_t *e;
    int v, r;
    unsigned long long ull;
    static const char *const clock_names[NVML_CLOCK_COUNT] = {"graphics", "sm", "mem", "video"};
    static const word_t ecc_words[] = {{"enabled", 1}, {"disabled", 0}, {"unsupported", -1},
                                       {"on", 1},      {"off", 0},      {NULL, 0}};
    static const word_t supp_words[] = {{"supported", 1}, {"unsupported", 0}, {NULL, 0}};
    static const word_t lost_words[] = {{"false", LOST_NO}, {"no", LOST_NO},
                                        {"true", LOST_QUERIES}, {"yes", LOST_QUERIES},
                                        {"enumeration", LOST_ENUMERATION}, {NULL, 0}};
    static const word_t remote_words[] = {{"switch", NVL_REMOTE_SWITCH},
                                          {"gpu", NVL_REMOTE_GPU}, {NULL, 0}};
    static const word_t change_words[] = {{"auto", MIGCHG_AUTO},          {"immediate", MIGCHG_IMMEDIATE},
                                          {"reset", MIGCHG_RESET},        {"pending", MIGCHG_PENDING},
                                          {"in_use", MIGCHG_IN_USE},      {NULL, 0}};
    static const word_t giid_words[] = {{"placement", GIID_PLACEMENT}, {"sequential", GIID_SEQUENTIAL},
                                        {"shuffled", GIID_SHUFFLED}, {NULL, 0}};
    static const word_t place_words[] = {{"least_damage", AUTOPLACE_LEAST_DAMAGE}, {"highest", AUTOPLACE_HIGHEST},
                                         {"lowest", AUTOPLACE_LOWEST}, {NULL, 0}};

    memset(g, 0, sizeof(*g));
    if (get_str(&c, "name", g->name, sizeof(g->name), "") == 0 || !g->name[0])
        perr(p, NULL, 0, "gpu %d: 'name' is required", i);

    r = get(&c, "uuid", buf, sizeof(buf), &e);
    if (r == 0 || (r > 0 && !strcasecmp(buf, "auto"))) {
        char s[300];
        snprintf(s, sizeof(s), "%s:gpu:%d", seed, i);
        fake_hash_uuid("GPU-", s, g->uuid, sizeof(g->uuid));
    } else if (r > 0) {
        if (strncmp(buf, "GPU-", 4) != 0 || strlen(buf) >= sizeof(g->uuid))
            where_err(&c, e, "UUID '%s' must look like GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx",
                      buf, "uuid");
        else
            copy_str(g->uuid, sizeof(g->uuid), buf);
    }
    get_str(&c, "serial", g->serial, sizeof(g->serial), "");
    get_str(&c, "board_part_number", g->board_part, sizeof(g->board_part), "");
    get_str(&c, "vbios_version", g->vbios, sizeof(g->vbios), "");

    r = get(&c, "pci_bus_id", buf, sizeof(buf), &e);
    if (r == 0)
        perr(p, NULL, 0, "gpu %d: 'pci_bus_id' is required", i);
    else if (r > 0 && parse_bus_id(buf, &g->domain, &g->bus, &g->dev, &g->func) != 0)
        where_err(&c, e, "bad PCI bus id '%s' (want 00000000:18:00.0)", buf, "pci_bus_id");
    get_u(&c, "pci_device_id", &g->pci_device_id, 0);
    get_u(&c, "pci_subsystem_id", &g->pci_subsystem_id, 0);
    get_u(&c, "minor_number", &g->minor, (unsigned)i);

    if (get_ull(&c, "memory_total_mib", &ull, 0) == 0)
        perr(p, NULL, 0, "gpu %d: 'memory_total_mib' is required", i);
    g->mem_total = ull << 20;
    get_ull(&c, "memory_reserved_mib", &ull, 0);
    g->mem_reserved = ull << 20;
    get_ull(&c, "memory_used_mib", &ull, 0);
    g->mem_used = ull << 20;
    if (g->mem_reserved + g->mem_used > g->mem_total)
        perr(p, NULL, 0, "gpu %d: reserved + used memory exceed the total", i);

    r = get(&c, "compute_capability", buf, sizeof(buf), &e);
    if (r > 0) {
        char tail;
        if (sscanf(buf, "%d.%d%c", &g->cc_major, &g->cc_minor, &tail) != 2)
            where_err(&c, e, "bad compute capability '%s' (want 9.0)", buf, "compute_capability");
    } else if (r == 0) {
        perr(p, NULL, 0, "gpu %d: 'compute_capability' is required", i);
    }
    r = get_word(&c, "architecture", arch_words, &v, -1);
    if (r == 0)
        perr(p, NULL, 0, "gpu %d: 'architecture' is required", i);
    g->arch = (unsigned)v;
    get_word(&c, "brand", brand_words, &g->brand, NVML_BRAND_NVIDIA);
    get_word(&c, "addressing_mode", addressing_words, &g->addressing, NVML_DEVICE_ADDRESSING_MODE_NONE);

    get_word(&c, "persistence_mode", bool_words, &g->persistence, 1);
    get_u(&c, "power_usage_mw", &g->power_usage, 0);
    get_u(&c, "power_limit_mw", &g->power_limit, 0);
    get_u(&c, "power_management_limit_mw", &g->power_mgmt_limit, g->power_limit);
    get_u(&c, "temperature_gpu", &g->temperature, 30);
    get_u(&c, "temperature_shutdown", &g->temp_threshold[NVML_TEMPERATURE_THRESHOLD_SHUTDOWN], 0);
    get_u(&c, "temperature_slowdown", &g->temp_threshold[NVML_TEMPERATURE_THRESHOLD_SLOWDOWN], 0);
    get_u(&c, "temperature_mem_max", &g->temp_threshold[NVML_TEMPERATURE_THRESHOLD_MEM_MAX], 0);
    get_u(&c, "temperature_gpu_max", &g->temp_threshold[NVML_TEMPERATURE_THRESHOLD_GPU_MAX], 0);
    for (int k = 0; k < NVML_CLOCK_COUNT; k++) {
        char key[32];
        snprintf(key, sizeof(key), "max_clock_%s", clock_names[k]);
        get_u(&c, key, &g->max_clock[k], 0);
        snprintf(key, sizeof(key), "clock_%s", clock_names[k]);
        get_u(&c, key, &g->clock[k], g->max_clock[k]);
    }
    get_u(&c, "pcie_gen_gpu_max", &g->pcie_gen_gpu_max, 4);
    get_u(&c, "pcie_gen_max", &g->pcie_gen_max, g->pcie_gen_gpu_max);
    get_u(&c, "pcie_gen_current", &g->pcie_gen_cur, g->pcie_gen_max);
    get_u(&c, "pcie_width_max", &g->pcie_width_max, 16);
    get_u(&c, "pcie_width_current", &g->pcie_width_cur, g->pcie_width_max);
    get_u(&c, "utilization_gpu", &g->util_gpu, 0);
    get_u(&c, "utilization_memory", &g->util_mem, 0);
    get_u(&c, "utilization_encoder", &g->util_enc, 0);
    get_u(&c, "utilization_decoder", &g->util_dec, 0);
    get_u(&c, "pcie_replay_counter", &g->pcie_replays, 0);
    /* default: an hour at the profile's power draw since the driver was loaded (mW x s = mJ) */
    get_ull(&c, "energy_consumption_mj", &g->energy_mj, (unsigned long long)g->power_usage * 3600ULL);

    get_word(&c, "ecc_mode", ecc_words, &v, 1);
    g->ecc_supported = v >= 0;
    g->ecc_cur = v > 0;
    get_word(&c, "ecc_mode_pending", ecc_words, &v, g->ecc_supported ? g->ecc_cur : -1);
    g->ecc_pending = v > 0;
    get_ull(&c, "ecc_volatile_corrected", &g->ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_VOLATILE_ECC], 0);
    get_ull(&c, "ecc_volatile_uncorrected", &g->ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_VOLATILE_ECC], 0);
    get_ull(&c, "ecc_aggregate_corrected", &g->ecc[NVML_MEMORY_ERROR_TYPE_CORRECTED][NVML_AGGREGATE_ECC], 0);
    get_ull(&c, "ecc_aggregate_uncorrected", &g->ecc[NVML_MEMORY_ERROR_TYPE_UNCORRECTED][NVML_AGGREGATE_ECC], 0);

    get_word(&c, "remapped_rows", supp_words, &g->remap_supported, 1);
    get_u(&c, "remapped_rows_correctable", &g->remap_corr, 0);
    get_u(&c, "remapped_rows_uncorrectable", &g->remap_unc, 0);
    get_word(&c, "remapped_rows_pending", bool_words, &v, 0);
    g->remap_pending = (unsigned)v;
    get_word(&c, "remapped_rows_failure", bool_words, &v, 0);
    g->remap_failure = (unsigned)v;

    if (get_list(&c, "clocks_event_reasons", reason_item, &g->clock_reasons) == 0)
        g->clock_reasons = 0x1; /* idle */

    get_u(&c, "nvlink_count", &g->nvlink_count, 0);
    if (g->nvlink_count > FAKE_MAX_LINKS) {
        perr(p, NULL, 0, "gpu %d: nvlink_count above %d", i, FAKE_MAX_LINKS);
        g->nvlink_count = 0;
    }
    get_word(&c, "nvlink_remote", remote_words, &g->nvlink_remote, NVL_REMOTE_SWITCH);
    r = get(&c, "nvlink_peer", buf, sizeof(buf), &e);
    g->nvlink_peer = -1;
    if (r > 0) {
        if (parse_ull(buf, &ull) != 0 || ull >= FAKE_MAX_GPUS)
            where_err(&c, e, "bad GPU index '%s'", buf, "nvlink_peer");
        else
            g->nvlink_peer = (int)ull;
    }
    get_list(&c, "nvlink_down", link_item, g);

    r = get(&c, "numa_node", buf, sizeof(buf), &e);
    g->numa_node = 0;
    if (r > 0) {
        if (!strcasecmp(buf, "unsupported"))
            g->numa_node = -1;
        else if (parse_ull(buf, &ull) != 0 || ull >= FAKE_MAX_NUMA)
            where_err(&c, e, "bad NUMA node '%s'", buf, "numa_node");
        else
            g->numa_node = (int)ull;
    }
    r = get(&c, "pcie_switch", buf, sizeof(buf), &e);
    g->pcie_switch = -1;
    if (r > 0) {
        if (parse_ull(buf, &ull) != 0 || ull > 1000)
            where_err(&c, e, "bad PCIe switch id '%s'", buf, "pcie_switch");
        else
            g->pcie_switch = (int)ull;
    }
    if (get_list(&c, "supported_events", event_item, &g->supported_events) == 0) {
        g->supported_events = nvmlEventTypePState | nvmlEventTypeXidCriticalError | nvmlEventTypeClock;
        if (g->ecc_supported)
            g->supported_events |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    }
    get_list(&c, "xid_events", xid_item, g);
    get_word(&c, "lost", lost_words, &g->lost, LOST_NO);

    r = get(&c, "mig_table", buf, sizeof(buf), &e);
    g->mig = NULL;
    if (r > 0 && strcasecmp(buf, "none") != 0) {
        g->mig = fake_mig_table_find(buf);
        if (!g->mig) {
            char msg[200];
            snprintf(msg, sizeof(msg), "unknown MIG table '%%s' (known: %s)", fake_mig_table_keys());
            where_err(&c, e, msg, buf, "mig_table");
        }
    }
    get_word(&c, "mig_mode", bool_words, &g->mig_mode_default, 0);
    get_word(&c, "mig_mode_change", change_words, &g->mig_change, MIGCHG_AUTO);
    /* NVIDIA: on Ampere a MIG mode change takes a GPU reset and persists; from Hopper on it
     * applies without one and does not survive a reset or reboot (REFERENCE.md section 5) */
    if (g->mig_change == MIGCHG_AUTO)
        g->mig_change = g->arch == NVML_DEVICE_ARCH_AMPERE ? MIGCHG_RESET : MIGCHG_IMMEDIATE;
    get_word(&c, "mig_gi_ids", giid_words, &g->mig_gi_ids, GIID_PLACEMENT);
    get_word(&c, "mig_auto_placement", place_words, &g->mig_auto_placement, AUTOPLACE_LEAST_DAMAGE);
    if (g->mig_mode_default && !g->mig)
        perr(p, NULL, 0, "gpu %d: mig_mode enabled without a mig_table", i);
    return 0;
}

/* The first line of `path` that starts with `prefix`, without it and trailing blanks, into out;
 * 0 when the file or the line is not there. */
static int read_prefixed(const char *path, const char *prefix, char *out, size_t len)
{
    char line[256];
    size_t plen = strlen(prefix);
    int found = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, prefix, plen) == 0) {
            char *v = line + plen;
            size_t l = strlen(v);
            while (l && isspace((unsigned char)v[l - 1]))
                v[--l] = '\0';
            copy_str(out, len, v);
            found = l > 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* The lab node's boot and driver packages, as a real node has them: the kernel module loaded at
 * boot is the driver installed then, and a driver installed since (a newer libnvidia-ml beside
 * the old module) makes NVML answer "Driver/library version mismatch" until the next reboot
 * (NVIDIA's NVML reference: NVML_ERROR_LIB_RM_VERSION_MISMATCH, "RM has detected an NVML/RM
 * version mismatch"). The node's boot unit writes "driver_version X" to GPUOPS_FAKE_NVML_BOOT
 * (default /run/gpuops-fake-nvml/boot, a tmpfs: gone with every reboot) when a driver package of
 * the lab's CUDA-style repository is installed; that package's marker
 * (GPUOPS_FAKE_NVML_LIBRARY, default /usr/lib/gpuops-fake-cuda-repo/libnvidia-ml1.txt,
 * "upstream-version=X") is the installed library. Neither file: the profile's driver_version
 * is loaded, as on a node whose driver came with it. */
static void apply_boot(fake_node_t *n)
{
    const char *boot = getenv("GPUOPS_FAKE_NVML_BOOT");
    const char *lib = getenv("GPUOPS_FAKE_NVML_LIBRARY");
    char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], boot_path[1024], lib_path[1024];
    if (!boot || !*boot) {
        snprintf(boot_path, sizeof(boot_path), "%s/run/gpuops-fake-nvml/boot", n->root);
        boot = boot_path;
    }
    if (!lib || !*lib) {
        snprintf(lib_path, sizeof(lib_path), "%s/usr/lib/gpuops-fake-cuda-repo/libnvidia-ml1.txt", n->root);
        lib = lib_path;
    }
    if (read_prefixed(boot, "driver_version ", v, sizeof(v)))
        copy_str(n->driver_version, sizeof(n->driver_version), v);
    if (n->driver_state == DRV_LOADED && read_prefixed(lib, "upstream-version=", v, sizeof(v)) &&
        strcmp(v, n->driver_version) != 0)
        n->driver_state = DRV_VERSION_MISMATCH;
}

static void profile_base(const char *path, char *out, size_t len)
{
    const char *b = strrchr(path, '/');
    size_t l;
    b = b ? b + 1 : path;
    l = strlen(b);
    if (l > 8 && !strcmp(b + l - 8, ".profile"))
        l -= 8;
    snprintf(out, len, "%.*s", (int)l, b);
}

/* Which GPUs the process sees. The kernel driver lets a process use a GPU through its device
 * node /dev/nvidia<minor>; in a container NVIDIA's Container Toolkit injects only the nodes of
 * the GPUs it was given (NVIDIA_VISIBLE_DEVICES, or a CDI device's deviceNodes), and NVML there
 * enumerates just those, indexed from 0 in PCI order ("nvidia-smi -L" in a pod given one GPU
 * lists one GPU 0). On the node itself (no channel) every GPU of the profile is visible. */
static void set_visible(fake_node_t *n)
{
    n->visible_count = 0;
    for (unsigned i = 0; i < n->gpu_count; i++) {
        char dev[32];
        snprintf(dev, sizeof(dev), "/dev/nvidia%u", n->gpus[i].minor);
        if (n->root[0] && access(dev, F_OK) != 0)
            continue;
        n->visible[n->visible_count++] = i;
    }
}

/* Which MIG devices the process sees. The driver lets a process use a MIG device through the
 * capability nodes of its GPU instance and compute instance (/dev/nvidia-caps/nvidia-cap<minor>,
 * the minors /proc/driver/nvidia-caps/mig-minors lists: 3 + 135 x GPU minor + 9 x GI id, + 1 + CI
 * id; NVIDIA's MIG user guide, "Device Nodes and Capabilities"); in a container the toolkit
 * injects only those of the MIG devices it was given, so NVML there enumerates just those
 * ("nvidia-smi -L" in a pod given one MIG device lists its GPU and that one MIG device). On the
 * node itself (no channel) every MIG device is visible. */
int fake_mig_visible(const fake_gpu_t *g, unsigned gi, unsigned ci)
{
    char dev[48];
    unsigned base = 3 + g->minor * 135 + gi * 9;
    if (!fake_node.root[0])
        return 1;
    snprintf(dev, sizeof(dev), "/dev/nvidia-caps/nvidia-cap%u", base);
    if (access(dev, F_OK) != 0)
        return 0;
    snprintf(dev, sizeof(dev), "/dev/nvidia-caps/nvidia-cap%u", base + 1 + ci);
    return access(dev, F_OK) == 0;
}

nvmlReturn_t fake_profile_load(fake_node_t *n)
{
    parser_t p;
    ctx_t c;
    const char *env_profile = getenv("GPUOPS_FAKE_NVML_PROFILE");
    const char *env_state = getenv("GPUOPS_FAKE_NVML_STATE");
    char seed[256], base[256], buf[VAL_MAX];
    static const word_t drv_words[] = {{"loaded", DRV_LOADED},
                                       {"not_loaded", DRV_NOT_LOADED},
                                       {"version_mismatch", DRV_VERSION_MISMATCH},
                                       {NULL, 0}};
    int v;

    memset(n, 0, sizeof(*n));
    memset(&p, 0, sizeof(p));
    if (env_profile && *env_profile) {
        copy_str(n->profile_path, sizeof(n->profile_path), env_profile);
    } else {
        copy_str(n->profile_path, sizeof(n->profile_path), "/etc/gpuops-fake-nvml/profile");
        /* in a container: the node's files through the driver channel (channel.c) */
        if (!file_readable(n->profile_path)) {
            fake_channel_root(n->root, sizeof(n->root));
            if (n->root[0])
                snprintf(n->profile_path, sizeof(n->profile_path), "%s/etc/gpuops-fake-nvml/profile", n->root);
        }
    }
    copy_str(include_root, sizeof(include_root), n->root);
    profile_base(n->profile_path, base, sizeof(base));
    if (env_state && *env_state) {
        copy_str(n->state_path, sizeof(n->state_path), env_state);
    } else if (env_profile && *env_profile) {
        const char *tmp = getenv("TMPDIR");
        snprintf(n->state_path, sizeof(n->state_path), "%s/gpuops-fake-nvml/%s.state",
                 tmp && *tmp ? tmp : "/tmp", base);
    } else {
        snprintf(n->state_path, sizeof(n->state_path), "%s/var/lib/gpuops-fake-nvml/state", n->root);
    }

    if (parse_file(&p, n->profile_path, 0) != 0) {
        parser_free(&p);
        return NVML_ERROR_DRIVER_NOT_LOADED; /* no "driver" installed */
    }
    check_keys(&p);

    c.p = &p;
    c.gpu = -1;
    get_str(&c, "description", n->description, sizeof(n->description), "");
    get_word(&c, "driver_state", drv_words, &n->driver_state, DRV_LOADED);
    if (get_str(&c, "driver_version", n->driver_version, sizeof(n->driver_version), "") == 0)
        perr(&p, n->profile_path, 0, "[node] driver_version is required");
    apply_boot(n);
    get_u(&c, "cuda_driver_version", (unsigned *)&n->cuda_version, 12080);
    snprintf(buf, sizeof(buf), "%d.%s", n->cuda_version / 1000, n->driver_version);
    get_str(&c, "nvml_version", n->nvml_version, sizeof(n->nvml_version), buf);
    if (get_u(&c, "gpu_count", &n->gpu_count, 0) == 0)
        perr(&p, n->profile_path, 0, "[node] gpu_count is required");
    if (n->gpu_count > FAKE_MAX_GPUS) {
        perr(&p, n->profile_path, 0, "gpu_count above %d", FAKE_MAX_GPUS);
        n->gpu_count = 0;
    }
    get_str(&c, "uuid_seed", seed, sizeof(seed), base);
    for (int k = 0; k < FAKE_MAX_NUMA; k++) {
        char key[32];
        snprintf(key, sizeof(key), "numa%d_cpus", k);
        get_list(&c, key, cpulist_item, n->numa_cpus[k]);
    }
    get_list(&c, "nvswitch_bus_ids", switch_item, n);
    get_u(&c, "nvswitch_pci_device_id", &n->switch_device_id, 0);
    get_word(&c, "p2p_pcie", p2p_words, &n->p2p_pcie, NVML_P2P_STATUS_OK);

    for (unsigned i = 0; i < n->gpu_count; i++)
        load_gpu(&p, n, seed, (int)i);

    /* cross-GPU invariants */
    for (unsigned i = 0; i < n->gpu_count; i++) {
        const fake_gpu_t *a = &n->gpus[i];
        for (unsigned j = i + 1; j < n->gpu_count; j++) {
            const fake_gpu_t *b = &n->gpus[j];
            if (!strcmp(a->uuid, b->uuid))
                perr(&p, n->profile_path, 0, "gpus %u and %u share UUID %s", i, j, a->uuid);
            if (a->domain == b->domain && a->bus == b->bus && a->dev == b->dev && a->func == b->func)
                perr(&p, n->profile_path, 0, "gpus %u and %u share a PCI bus id", i, j);
        }
        if (a->nvlink_count && a->nvlink_remote == NVL_REMOTE_GPU &&
            (a->nvlink_peer < 0 || (unsigned)a->nvlink_peer >= n->gpu_count ||
             a->nvlink_peer == (int)i))
            perr(&p, n->profile_path, 0, "gpu %u: nvlink_remote = gpu needs a valid nvlink_peer", i);
        if (a->nvlink_count && a->nvlink_remote == NVL_REMOTE_SWITCH && n->nswitches == 0)
            perr(&p, n->profile_path, 0, "gpu %u: NVLinks to switches but no [node] nvswitch_bus_ids", i);
    }
    set_visible(n);
    v = p.errors;
    parser_free(&p);
    return v ? NVML_ERROR_UNKNOWN : NVML_SUCCESS;
}

int fake_visible_index(unsigned i)
{
    for (unsigned k = 0; k < fake_node.visible_count; k++)
        if (fake_node.visible[k] == i)
            return (int)k;
    return -1;
}
