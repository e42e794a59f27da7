/*
 * Library core: init/shutdown, error strings, system queries, handle
 * validation, helpers and the test hooks.
 */
#include "fake.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
fake_node_t fake_node;
int fake_refcount;
fake_state_t fake_state;

struct nvmlDevice_st fake_dev_handles[FAKE_MAX_GPUS];
struct nvmlDevice_st fake_mig_handles[FAKE_MAX_GPUS][FAKE_MAX_GI][FAKE_MAX_CI];
struct nvmlGpuInstance_st fake_gi_handles[FAKE_MAX_GPUS][FAKE_MAX_GI];
struct nvmlComputeInstance_st fake_ci_handles[FAKE_MAX_GPUS][FAKE_MAX_GI][FAKE_MAX_CI];

__attribute__((constructor)) static void fake_handles_init(void)
{
    for (int g = 0; g < FAKE_MAX_GPUS; g++) {
        fake_dev_handles[g].gpu = g;
        for (unsigned a = 0; a < FAKE_MAX_GI; a++) {
            fake_gi_handles[g][a].gpu = g;
            fake_gi_handles[g][a].gi = a;
            for (unsigned b = 0; b < FAKE_MAX_CI; b++) {
                struct nvmlDevice_st *m = &fake_mig_handles[g][a][b];
                m->gpu = g;
                m->mig = 1;
                m->gi = a;
                m->ci = b;
                fake_ci_handles[g][a][b].gpu = g;
                fake_ci_handles[g][a][b].gi = a;
                fake_ci_handles[g][a][b].ci = b;
            }
        }
    }
}

/* ---- call tracing (lets the test-suite prove every export is exercised) ---- */

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *traced[512];
static unsigned ntraced;

void fake_trace(const char *fn)
{
    pthread_mutex_lock(&trace_lock);
    for (unsigned i = 0; i < ntraced; i++)
        if (traced[i] == fn || !strcmp(traced[i], fn)) {
            pthread_mutex_unlock(&trace_lock);
            return;
        }
    if (ntraced < sizeof(traced) / sizeof(traced[0]))
        traced[ntraced++] = fn;
    pthread_mutex_unlock(&trace_lock);
}

/* writes the names of the NVML functions called so far in this process,
 * one per line; returns their number, or -1 when buf is too small */
int gpuopsFakeNvmlCalledFunctions(char *buf, unsigned int size)
{
    size_t used = 0;
    int n;
    pthread_mutex_lock(&trace_lock);
    n = (int)ntraced;
    for (unsigned i = 0; i < ntraced; i++) {
        size_t l = strlen(traced[i]);
        if (!buf || used + l + 2 > size) {
            n = -1;
            break;
        }
        memcpy(buf + used, traced[i], l);
        used += l;
        buf[used++] = '\n';
    }
    if (buf && n >= 0)
        buf[used] = '\0';
    pthread_mutex_unlock(&trace_lock);
    return n;
}

/* ---- helpers ---- */

static unsigned long long mix64(unsigned long long x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static unsigned long long fnv1a(const char *s, unsigned long long h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 0x100000001b3ULL;
    }
    return h;
}

void fake_hash_uuid(const char *prefix, const char *seed, char *out, size_t len)
{
    unsigned long long a = mix64(fnv1a(seed, 0xcbf29ce484222325ULL));
    unsigned long long b = mix64(a ^ fnv1a(seed, 0x84222325cbf29ce4ULL));
    snprintf(out, len, "%s%08llx-%04llx-%04llx-%04llx-%012llx", prefix, a >> 32,
             (a >> 16) & 0xFFFF, a & 0xFFFF, b >> 48, b & 0xFFFFFFFFFFFFULL);
}

void fake_mig_uuid(const fake_gpu_t *g, unsigned gi, unsigned ci, char *out, size_t len)
{
    char seed[160];
    snprintf(seed, sizeof(seed), "%s/gi%u/ci%u", g->uuid, gi, ci);
    fake_hash_uuid("MIG-", seed, out, len);
}

nvmlReturn_t fake_copy_str(char *dst, unsigned int length, const char *src)
{
    size_t l;
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    l = strlen(src);
    if (length < l + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, l + 1);
    return NVML_SUCCESS;
}

void fake_fill_pci(nvmlPciInfo_t *pci, unsigned domain, unsigned bus, unsigned dev,
                   unsigned device_id, unsigned subsys_id)
{
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT,
             domain & 0xFFFF, bus, dev);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus, dev);
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = device_id;
    pci->pciSubSystemId = subsys_id;
}

#define IN_ARRAY(p, arr) \
    ((uintptr_t)(p) >= (uintptr_t)(arr) && (uintptr_t)(p) < (uintptr_t)(arr) + sizeof(arr))

nvmlReturn_t fake_dev(nvmlDevice_t device, int flags, fake_gpu_t **gpu)
{
    const struct nvmlDevice_st *d = device;
    fake_gpu_t *g;

    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (IN_ARRAY(d, fake_dev_handles)) {
        if (((uintptr_t)d - (uintptr_t)fake_dev_handles) % sizeof(*d))
            return NVML_ERROR_INVALID_ARGUMENT;
    } else if (IN_ARRAY(d, fake_mig_handles)) {
        if (((uintptr_t)d - (uintptr_t)fake_mig_handles) % sizeof(*d))
            return NVML_ERROR_INVALID_ARGUMENT;
    } else {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (d->gpu < 0 || (unsigned)d->gpu >= fake_node.gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    g = &fake_node.gpus[d->gpu];
    if (g->lost != LOST_NO && !(flags & DEV_ALLOW_LOST))
        return NVML_ERROR_GPU_IS_LOST;
    if (d->mig) {
        if (!fake_mig_dev_exists(d))
            return NVML_ERROR_INVALID_ARGUMENT;
        if (!(flags & DEV_ALLOW_MIG))
            return NVML_ERROR_NOT_SUPPORTED;
    }
    *gpu = g;
    return NVML_SUCCESS;
}

/* ---- init / shutdown ---- */

static nvmlReturn_t do_init(void)
{
    fake_node_t *tmp = malloc(sizeof(*tmp));
    nvmlReturn_t r;

    if (!tmp)
        return NVML_ERROR_MEMORY;
    r = fake_profile_load(tmp);
    if (r == NVML_SUCCESS) {
        if (tmp->driver_state == DRV_NOT_LOADED)
            r = NVML_ERROR_DRIVER_NOT_LOADED;
        else if (tmp->driver_state == DRV_VERSION_MISMATCH)
            r = NVML_ERROR_LIB_RM_VERSION_MISMATCH;
    }
    if (r == NVML_SUCCESS) {
        memcpy(&fake_node, tmp, sizeof(*tmp));
        fake_refcount++;
    }
    free(tmp);
    return r;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    API_ENTER();
    API_RETURN(do_init());
}

nvmlReturn_t nvmlInit_v2(void)
{
    API_ENTER();
    API_RETURN(do_init());
}

nvmlReturn_t nvmlInit(void)
{
    API_ENTER();
    API_RETURN(do_init());
}

nvmlReturn_t nvmlShutdown(void)
{
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    fake_refcount--;
    API_RETURN(NVML_SUCCESS);
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    fake_trace(__func__);
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
        return "The requested vgpu operation is not available on target device, becasue ECC is enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Ran out of critical resources, other than memory";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "The requested frequency is not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "The provided version is invalid/unsupported";
    case NVML_ERROR_DEPRECATED: return "The requested functionality has been deprecated";
    case NVML_ERROR_NOT_READY: return "The system is not ready for the request";
    case NVML_ERROR_GPU_NOT_FOUND: return "No GPUs were found";
    case NVML_ERROR_INVALID_STATE: return "Resource not in correct state to perform requested operation";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset not supported for given device/parameters";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
    }
}

/* ---- system queries ---- */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    API_RETURN(fake_copy_str(version, length, fake_node.driver_version));
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    API_RETURN(fake_copy_str(version, length, fake_node.nvml_version));
}

static nvmlReturn_t cuda_version(int *v)
{
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = fake_node.cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    API_ENTER();
    API_RETURN(cuda_version(cudaDriverVersion));
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    API_ENTER();
    API_RETURN(cuda_version(cudaDriverVersion));
}

/* the name of a process the lab marked busy on a GPU of the node (gpuopsFakeNvmlSetBusy) */
nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length)
{
    nvmlReturn_t rc = NVML_ERROR_NOT_FOUND;
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!name || !length)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (fake_state_open(&fake_state, fake_node.state_path, 0) != NVML_SUCCESS)
        API_RETURN(NVML_ERROR_UNKNOWN);
    for (unsigned i = 0; i < fake_node.gpu_count && rc == NVML_ERROR_NOT_FOUND; i++) {
        fake_gpu_state_t *s = fake_state_gpu(&fake_state, &fake_node.gpus[i]);
        for (unsigned k = 0; s && k < FAKE_MAX_BUSY; k++)
            if (s->busy[k].used && s->busy[k].pid == pid && s->busy[k].kind != BUSY_CLIENT) {
                rc = fake_copy_str(name, length, s->busy[k].name);
                break;
            }
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

/* ---- fault injection and the call log ---- */

/* GPUOPS_FAKE_NVML_FAULTS="fn:N=ERROR[,fn:N+=ERROR...]": the N-th call (counted from 1 in this
 * process) of NVML function fn fails with ERROR before it does anything; "N+" fails that call
 * and every later one. ERROR is an NVML error name with or without NVML_ERROR_ (IN_USE,
 * INSUFFICIENT_RESOURCES, UNKNOWN, ...) or its number. A malformed entry is reported on stderr
 * once and ignored. */
#define FAKE_MAX_FAULTS 16
typedef struct fault {
    char fn[96];
    unsigned nth;
    int and_later;
    nvmlReturn_t err;
    unsigned calls;
} fault_t;
static fault_t faults[FAKE_MAX_FAULTS];
static unsigned nfaults;
static int faults_parsed;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
    const char *name;
    nvmlReturn_t value;
} error_names[] = {
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"TIMEOUT", NVML_ERROR_TIMEOUT},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
    {"IN_USE", NVML_ERROR_IN_USE},
    {"MEMORY", NVML_ERROR_MEMORY},
    {"NO_DATA", NVML_ERROR_NO_DATA},
    {"INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES},
    {"UNKNOWN", NVML_ERROR_UNKNOWN},
};

static int parse_error(const char *w, nvmlReturn_t *out)
{
    char *end;
    long v;
    if (!strncmp(w, "NVML_ERROR_", 11))
        w += 11;
    for (size_t i = 0; i < sizeof(error_names) / sizeof(error_names[0]); i++)
        if (!strcmp(error_names[i].name, w)) {
            *out = error_names[i].value;
            return 0;
        }
    v = strtol(w, &end, 10);
    if (*w && !*end && v > 0 && v <= NVML_ERROR_UNKNOWN) {
        *out = (nvmlReturn_t)v;
        return 0;
    }
    return -1;
}

static void parse_faults(void)
{
    const char *env = getenv("GPUOPS_FAKE_NVML_FAULTS");
    char buf[2048], *save = NULL;
    faults_parsed = 1;
    if (!env || !*env)
        return;
    snprintf(buf, sizeof(buf), "%s", env);
    for (char *item = strtok_r(buf, ", ", &save); item; item = strtok_r(NULL, ", ", &save)) {
        fault_t f;
        char *colon = strchr(item, ':'), *eq = strchr(item, '='), *end;
        memset(&f, 0, sizeof(f));
        if (!colon || !eq || eq < colon || colon == item || (size_t)(colon - item) >= sizeof(f.fn))
            goto bad;
        memcpy(f.fn, item, (size_t)(colon - item));
        f.nth = (unsigned)strtoul(colon + 1, &end, 10);
        if (end == colon + 1 || f.nth == 0)
            goto bad;
        if (*end == '+') {
            f.and_later = 1;
            end++;
        }
        if (end != eq || parse_error(eq + 1, &f.err) != 0)
            goto bad;
        if (nfaults < FAKE_MAX_FAULTS)
            faults[nfaults++] = f;
        continue;
bad:
        fprintf(stderr, "gpuops fake NVML: GPUOPS_FAKE_NVML_FAULTS: ignoring '%s' (want function:N=ERROR or "
                        "function:N+=ERROR, e.g. nvmlDeviceCreateGpuInstance:3=INSUFFICIENT_RESOURCES)\n", item);
    }
}

nvmlReturn_t fake_fault(const char *fn)
{
    nvmlReturn_t r = NVML_SUCCESS;
    pthread_mutex_lock(&fault_lock);
    if (!faults_parsed)
        parse_faults();
    for (unsigned i = 0; i < nfaults; i++) {
        fault_t *f = &faults[i];
        if (strcmp(f->fn, fn) != 0)
            continue;
        f->calls++;
        if (f->calls == f->nth || (f->and_later && f->calls > f->nth))
            r = f->err;
    }
    pthread_mutex_unlock(&fault_lock);
    if (r != NVML_SUCCESS)
        fake_call_log(fn, -1, "injected", r);
    return r;
}

void fake_call_log(const char *fn, int gpu, const char *detail, nvmlReturn_t rc)
{
    const char *path = getenv("GPUOPS_FAKE_NVML_CALL_LOG");
    FILE *f;
    if (!path || !*path)
        return;
    f = fopen(path, "a");
    if (!f)
        return;
    fprintf(f, "%s gpu=%d %s rc=%d\n", fn, gpu, detail && *detail ? detail : "-", (int)rc);
    fclose(f);
}

/* ---- GPU reset and node reboot (NVIDIA's MIG user guide; REFERENCE.md section 5) ---- */

int fake_busy(const fake_gpu_t *g, const fake_gpu_state_t *s, int gi, int ci)
{
    if (gi < 0 && g->mig_change == MIGCHG_IN_USE)
        return 1;
    for (unsigned k = 0; k < FAKE_MAX_BUSY; k++) {
        const fake_busy_rec_t *b = &s->busy[k];
        if (!b->used)
            continue;
        if (gi < 0 || (b->gi == gi && (ci < 0 || b->ci < 0 || b->ci == ci)))
            return 1;
    }
    return 0;
}

/* A GPU reset fails IN_USE while anything holds the GPU. It drops every GPU and compute
 * instance; Ampere applies a pending MIG mode, Hopper and later come back in their boot mode. */
nvmlReturn_t fake_gpu_reset(const fake_gpu_t *g, fake_gpu_state_t *s)
{
    if (fake_busy(g, s, -1, -1))
        return NVML_ERROR_IN_USE;
    if (g->mig) {
        if (g->mig_change == MIGCHG_IMMEDIATE)
            s->mig_cur = s->mig_pend = g->mig_mode_default ? 1 : 0;
        else
            s->mig_cur = s->mig_pend;
    }
    memset(s->gi, 0, sizeof(s->gi));
    s->created = 0;
    s->nxid = 0;
    return NVML_SUCCESS;
}

/* A reboot ends every process and client; the MIG mode is as after a reset (Ampere's pending
 * mode applies even where a client held the GPU: clients start after the driver), and the
 * persistence mode is the node's configured one again. */
void fake_gpu_reboot(const fake_gpu_t *g, fake_gpu_state_t *s)
{
    memset(s->busy, 0, sizeof(s->busy));
    if (g->mig) {
        if (g->mig_change == MIGCHG_IMMEDIATE)
            s->mig_cur = s->mig_pend = g->mig_mode_default ? 1 : 0;
        else
            s->mig_cur = s->mig_pend;
    }
    memset(s->gi, 0, sizeof(s->gi));
    s->created = 0;
    s->nxid = 0;
    s->persistence = -1;
}

/* runs fn on the state record of every GPU of the current profile (uuid NULL) or of the GPU
 * with that UUID (NOT_FOUND when the node has none), with the state file locked; works with or
 * without nvmlInit */
static int with_node_state(const char *uuid, nvmlReturn_t (*fn)(const fake_gpu_t *, fake_gpu_state_t *, void *),
                           void *arg)
{
    fake_node_t *tmp;
    nvmlReturn_t r;
    int matched = 0;

    tmp = malloc(sizeof(*tmp));
    if (!tmp)
        return NVML_ERROR_MEMORY;
    pthread_mutex_lock(&fake_lock);
    r = fake_profile_load(tmp);
    if (r == NVML_SUCCESS)
        r = fake_state_open(&fake_state, tmp->state_path, 1);
    if (r == NVML_SUCCESS) {
        for (unsigned i = 0; i < tmp->gpu_count && r == NVML_SUCCESS; i++) {
            fake_gpu_state_t *s;
            if (uuid && strcmp(uuid, tmp->gpus[i].uuid) != 0)
                continue;
            matched = 1;
            s = fake_state_gpu(&fake_state, &tmp->gpus[i]);
            r = s ? fn(&tmp->gpus[i], s, arg) : NVML_ERROR_UNKNOWN;
        }
        if (r == NVML_SUCCESS && uuid && !matched)
            r = NVML_ERROR_NOT_FOUND;
        if (r == NVML_SUCCESS)
            r = fake_state_commit(&fake_state);
        fake_state_close(&fake_state);
    }
    pthread_mutex_unlock(&fake_lock);
    free(tmp);
    return (int)r;
}

static nvmlReturn_t do_reboot(const fake_gpu_t *g, fake_gpu_state_t *s, void *arg)
{
    (void)arg;
    fake_gpu_reboot(g, s);
    return NVML_SUCCESS;
}

static nvmlReturn_t do_reset(const fake_gpu_t *g, fake_gpu_state_t *s, void *arg)
{
    (void)arg;
    return fake_gpu_reset(g, s);
}

/* Test hook: a reboot of the node (every GPU). Returns an nvmlReturn_t value. */
int gpuopsFakeNvmlSimulateReboot(void)
{
    int r;
    fake_trace(__func__);
    r = with_node_state(NULL, do_reboot, NULL);
    fake_call_log("reboot", -1, NULL, (nvmlReturn_t)r);
    return r;
}

/* Test hook: a GPU reset of the GPU with that UUID (what `nvidia-smi -r -i` asks the driver
 * for): IN_USE while anything holds it, NOT_FOUND for a UUID the node does not have. */
int gpuopsFakeNvmlResetGpu(const char *uuid)
{
    int r;
    fake_trace(__func__);
    if (!uuid)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = with_node_state(uuid, do_reset, NULL);
    fake_call_log("reset", -1, uuid, (nvmlReturn_t)r);
    return r;
}

static nvmlReturn_t do_xid(const fake_gpu_t *g, fake_gpu_state_t *s, void *arg)
{
    (void)g;
    if (s->nxid >= FAKE_MAX_XIDS) /* the oldest goes: a GPU keeps the newest */
        memmove(s->xid, s->xid + 1, sizeof(s->xid[0]) * --s->nxid);
    s->xid[s->nxid++] = *(const unsigned *)arg;
    return NVML_SUCCESS;
}

/* Test hook: the GPU with that UUID reports XID xid (as the driver does on a fault): event sets
 * registered for nvmlEventTypeXidCriticalError on it deliver it; a GPU reset or a reboot clears
 * what was injected. NOT_FOUND for a UUID the node does not have. */
int gpuopsFakeNvmlInjectXid(const char *uuid, unsigned int xid)
{
    int r;
    fake_trace(__func__);
    if (!uuid || xid == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = with_node_state(uuid, do_xid, &xid);
    fake_call_log("xid", -1, uuid, (nvmlReturn_t)r);
    return r;
}

typedef struct busy_arg {
    int add;
    fake_busy_rec_t rec;
} busy_arg_t;

static nvmlReturn_t do_busy(const fake_gpu_t *g, fake_gpu_state_t *s, void *arg)
{
    busy_arg_t *a = arg;
    if (!a->add) {
        for (unsigned k = 0; k < FAKE_MAX_BUSY; k++)
            if (s->busy[k].used && (a->rec.pid == 0 || s->busy[k].pid == a->rec.pid))
                memset(&s->busy[k], 0, sizeof(s->busy[k]));
        return NVML_SUCCESS;
    }
    if (a->rec.gi >= 0) {
        if (!g->mig || s->mig_cur != 1 || a->rec.gi >= FAKE_MAX_GI || !s->gi[a->rec.gi].used)
            return NVML_ERROR_NOT_FOUND;
        if (a->rec.ci >= 0 && (a->rec.ci >= FAKE_MAX_CI || !s->gi[a->rec.gi].ci[a->rec.ci].used))
            return NVML_ERROR_NOT_FOUND;
    } else if (a->rec.ci >= 0) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned k = 0; k < FAKE_MAX_BUSY; k++)
        if (!s->busy[k].used) {
            s->busy[k] = a->rec;
            s->busy[k].used = 1;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

/* Test hook: something starts holding the GPU with that UUID (gi/ci -1: the whole GPU, else that GPU or
 * compute instance, which must exist). kind: "compute" or "graphics" (a process, listed by the
 * running-process queries) or "client" (nvidia-persistenced, DCGM...: holds the GPU, no process
 * listed). name: no blanks. Returns an nvmlReturn_t value (NOT_FOUND: no such instance). */
int gpuopsFakeNvmlSetBusy(const char *uuid, int gi, int ci, unsigned int pid, const char *kind,
                          unsigned long long usedMiB, const char *name)
{
    busy_arg_t a;
    fake_trace(__func__);
    if (!uuid || !kind || !name || !*name || strpbrk(name, " \t\n") || pid == 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(&a, 0, sizeof(a));
    a.add = 1;
    a.rec.gi = gi < 0 ? -1 : gi;
    a.rec.ci = ci < 0 ? -1 : ci;
    a.rec.pid = pid;
    a.rec.used_mib = usedMiB;
    if (!strcmp(kind, "compute"))
        a.rec.kind = BUSY_COMPUTE;
    else if (!strcmp(kind, "graphics"))
        a.rec.kind = BUSY_GRAPHICS;
    else if (!strcmp(kind, "client"))
        a.rec.kind = BUSY_CLIENT;
    else
        return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(a.rec.name, sizeof(a.rec.name), "%s", name);
    return with_node_state(uuid, do_busy, &a);
}

/* Test hook: process/client pid stops holding the GPU with that UUID (uuid NULL: any GPU; pid
 * 0: everything). */
int gpuopsFakeNvmlClearBusy(const char *uuid, unsigned int pid)
{
    busy_arg_t a;
    fake_trace(__func__);
    memset(&a, 0, sizeof(a));
    a.rec.pid = pid;
    return with_node_state(uuid, do_busy, &a);
}

/* ---- test hook: what the "driver installation" of the profile looks like ---- */

/* Describes the current profile for the lab's driver set-up (gpuops-fake-driver),
 * whatever its driver state, so that the files a driver installation leaves on
 * disk (version-named libraries, device nodes) can follow the profile even when
 * nvmlInit fails on purpose. Writes one item per line:
 *     driver_state loaded|not_loaded|version_mismatch
 *     driver_version 570.172.08
 *     gpu INDEX MINOR MIG(0|1) PCI-BUS-ID PCI-DEVICE-ID PCI-SUBSYSTEM-ID NUMA-NODE
 * (ids as NVML reports them, 0x233010DE; NUMA node -1 when unknown). Works with or without nvmlInit. Returns an nvmlReturn_t value:
 * DRIVER_NOT_LOADED when no profile can be read, UNKNOWN for a bad one,
 * INSUFFICIENT_SIZE when buf is too small. */
int gpuopsFakeNvmlDescribe(char *buf, unsigned int size)
{
    static const char *const states[] = {"loaded", "not_loaded", "version_mismatch"};
    fake_node_t *tmp;
    nvmlReturn_t r;
    size_t used;
    int n;

    fake_trace(__func__);
    if (!buf || !size)
        return NVML_ERROR_INVALID_ARGUMENT;
    tmp = malloc(sizeof(*tmp));
    if (!tmp)
        return NVML_ERROR_MEMORY;
    pthread_mutex_lock(&fake_lock);
    r = fake_profile_load(tmp);
    pthread_mutex_unlock(&fake_lock);
    if (r == NVML_SUCCESS) {
        n = snprintf(buf, size, "driver_state %s\ndriver_version %s\n", states[tmp->driver_state],
                     tmp->driver_version);
        used = n < 0 ? size : (size_t)n;
        for (unsigned i = 0; i < tmp->gpu_count && used < size; i++) {
            const fake_gpu_t *g = &tmp->gpus[i];
            n = snprintf(buf + used, size - used, "gpu %u %u %d " NVML_DEVICE_PCI_BUS_ID_FMT " 0x%08X 0x%08X %d\n",
                         i, g->minor, g->mig != NULL, g->domain, g->bus, g->dev, g->pci_device_id,
                         g->pci_subsystem_id, g->numa_node);
            used += n < 0 ? size : (size_t)n;
        }
        if (used >= size) {
            buf[0] = '\0';
            r = NVML_ERROR_INSUFFICIENT_SIZE;
        }
    }
    free(tmp);
    return (int)r;
}
