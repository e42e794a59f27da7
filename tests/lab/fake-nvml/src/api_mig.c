/*
 * Multi-Instance GPU. All MIG state lives in the shared state file (see
 * state.c) and is re-read on every call, so separate processes see one GPU.
 *
 * Semantics modelled on real NVML (see REFERENCE.md section 5):
 *  - profile INFO is looked up by profile INDEX (NVML_GPU_INSTANCE_PROFILE_*),
 *    everything else takes the profile ID from that info (19, 20, 15, 14, 9, 5, 0);
 *  - nvmlDeviceSetMigMode reports the activation status in its out parameter:
 *    NVML_SUCCESS, NVML_ERROR_RESET_REQUIRED or NVML_ERROR_IN_USE (profile key
 *    mig_mode_change = immediate | pending | in_use); the pending mode is applied
 *    by a (simulated) GPU reset, which also drops all instances;
 *  - disabling MIG while GPU instances exist fails with NVML_ERROR_IN_USE;
 *  - GPU instances are placed on the 8 memory slices; overlapping placements
 *    and exhausted profiles fail with NVML_ERROR_INSUFFICIENT_RESOURCES.
 */
#include "fake.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define IN_ARRAY(p, arr) \
    ((uintptr_t)(p) >= (uintptr_t)(arr) && (uintptr_t)(p) < (uintptr_t)(arr) + sizeof(arr))

/* ---- helpers ---- */

static unsigned mem_mask(const fake_gpu_state_t *s)
{
    unsigned m = 0;
    for (unsigned a = 0; a < FAKE_MAX_GI; a++)
        if (s->gi[a].used)
            m |= ((1u << s->gi[a].size) - 1) << s->gi[a].start;
    return m;
}

static unsigned used_slices(const fake_gpu_t *g, const fake_gpu_state_t *s)
{
    unsigned n = 0;
    for (unsigned a = 0; a < FAKE_MAX_GI; a++)
        if (s->gi[a].used) {
            const fake_gi_profile_t *p = fake_mig_by_id(g->mig, s->gi[a].profile_id);
            n += p ? p->slices : 0;
        }
    return n;
}

static unsigned count_profile(const fake_gpu_state_t *s, unsigned id)
{
    unsigned n = 0;
    for (unsigned a = 0; a < FAKE_MAX_GI; a++)
        n += s->gi[a].used && s->gi[a].profile_id == id;
    return n;
}

static int placement_free(const fake_gpu_state_t *s, unsigned start, unsigned size)
{
    return !(mem_mask(s) & (((1u << size) - 1) << start));
}

static unsigned gi_capacity(const fake_gpu_t *g, const fake_gpu_state_t *s, const fake_gi_profile_t *p)
{
    unsigned n = 0, left, by_slices;
    for (unsigned k = 0; k < p->nstarts; k++)
        n += placement_free(s, p->starts[k], p->mem_slices);
    left = p->count - count_profile(s, p->id);
    if (n > left)
        n = left;
    by_slices = (g->mig->compute_slices - used_slices(g, s)) / p->slices;
    return n < by_slices ? n : by_slices;
}

/* physical, MIG-capable device + its state (state left open on success) */
static nvmlReturn_t mig_open(nvmlDevice_t device, int exclusive, fake_gpu_t **g, fake_gpu_state_t **s)
{
    nvmlReturn_t rc = fake_dev(device, 0, g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!(*g)->mig)
        return NVML_ERROR_NOT_SUPPORTED;
    rc = fake_state_open(&fake_state, fake_node.state_path, exclusive);
    if (rc != NVML_SUCCESS)
        return rc;
    *s = fake_state_gpu(&fake_state, *g);
    if (!*s) {
        fake_state_close(&fake_state);
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

typedef struct gi_ctx {
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    fake_gi_rec_t *rec;
    const fake_gi_profile_t *p;
    int gpu;
    unsigned id;
} gi_ctx_t;

/* validates a GPU instance handle; leaves the state open on success */
static nvmlReturn_t gi_open(nvmlGpuInstance_t gpuInstance, int exclusive, gi_ctx_t *c)
{
    const struct nvmlGpuInstance_st *h = gpuInstance;
    nvmlReturn_t rc;
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!IN_ARRAY(h, fake_gi_handles) ||
        ((uintptr_t)h - (uintptr_t)fake_gi_handles) % sizeof(*h))
        return NVML_ERROR_INVALID_ARGUMENT;
    if ((unsigned)h->gpu >= fake_node.gpu_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    c->gpu = h->gpu;
    c->id = h->gi;
    c->g = &fake_node.gpus[h->gpu];
    if (c->g->lost != LOST_NO)
        return NVML_ERROR_GPU_IS_LOST;
    if (!c->g->mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = fake_state_open(&fake_state, fake_node.state_path, exclusive);
    if (rc != NVML_SUCCESS)
        return rc;
    c->s = fake_state_gpu(&fake_state, c->g);
    if (!c->s || c->s->mig_cur != 1 || !c->s->gi[h->gi].used) {
        fake_state_close(&fake_state);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    c->rec = &c->s->gi[h->gi];
    c->p = fake_mig_by_id(c->g->mig, c->rec->profile_id);
    if (!c->p) {
        fake_state_close(&fake_state);
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

int fake_mig_dev_exists(const struct nvmlDevice_st *d)
{
    const fake_gpu_t *g = &fake_node.gpus[d->gpu];
    const fake_gpu_state_t *s;
    int ok = 0;
    if (!g->mig || d->gi >= FAKE_MAX_GI || d->ci >= FAKE_MAX_CI)
        return 0;
    if (fake_state_open(&fake_state, fake_node.state_path, 0) != NVML_SUCCESS)
        return 0;
    s = fake_state_gpu(&fake_state, g);
    ok = s && s->mig_cur == 1 && s->gi[d->gi].used && s->gi[d->gi].ci[d->ci].used;
    fake_state_close(&fake_state);
    return ok;
}

nvmlReturn_t fake_mig_dev_profile(const struct nvmlDevice_st *d, const fake_gi_profile_t **gip,
                                  unsigned *ci_slices)
{
    const fake_gpu_t *g = &fake_node.gpus[d->gpu];
    const fake_gpu_state_t *s;
    nvmlReturn_t rc = fake_state_open(&fake_state, fake_node.state_path, 0);
    if (rc != NVML_SUCCESS)
        return rc;
    s = fake_state_gpu(&fake_state, g);
    rc = NVML_ERROR_INVALID_ARGUMENT;
    if (s && s->gi[d->gi].used && s->gi[d->gi].ci[d->ci].used) {
        *gip = fake_mig_by_id(g->mig, s->gi[d->gi].profile_id);
        *ci_slices = s->gi[d->gi].ci[d->ci].size;
        rc = *gip ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
    }
    fake_state_close(&fake_state);
    return rc;
}

/* ---- MIG mode ---- */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!currentMode || !pendingMode) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        *currentMode = (unsigned)s->mig_cur;
        *pendingMode = (unsigned)s->mig_pend;
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    char detail[32];
    API_ENTER();
    rc = mig_open(device, 1, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!activationStatus || (mode != NVML_DEVICE_MIG_DISABLE && mode != NVML_DEVICE_MIG_ENABLE)) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    if (mode == NVML_DEVICE_MIG_DISABLE && mem_mask(s)) {
        rc = NVML_ERROR_IN_USE; /* GPU instances still exist */
        goto out;
    }
    if ((int)mode == s->mig_cur) {
        s->mig_pend = (int)mode; /* also cancels a pending change */
        *activationStatus = NVML_SUCCESS;
    } else if (g->mig_change == MIGCHG_IMMEDIATE) {
        /* Hopper and later: no reset needed, but not while a client holds the GPU */
        if (fake_busy(g, s, -1, -1)) {
            *activationStatus = NVML_ERROR_IN_USE;
        } else {
            s->mig_cur = s->mig_pend = (int)mode;
            memset(s->gi, 0, sizeof(s->gi));
            *activationStatus = NVML_SUCCESS;
        }
    } else if (g->mig_change == MIGCHG_RESET && !fake_busy(g, s, -1, -1)) {
        /* Ampere: NVML resets the idle GPU itself to activate the mode */
        s->mig_pend = (int)mode;
        *activationStatus = fake_gpu_reset(g, s);
    } else {
        s->mig_pend = (int)mode;
        *activationStatus = g->mig_change == MIGCHG_PENDING ? NVML_ERROR_RESET_REQUIRED : NVML_ERROR_IN_USE;
    }
    rc = fake_state_commit(&fake_state);
out:
    snprintf(detail, sizeof(detail), "mode=%u activation=%d", mode,
             rc == NVML_SUCCESS && activationStatus ? (int)*activationStatus : -1);
    fake_call_log(__func__, (int)(g - fake_node.gpus), detail, rc);
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

/* ---- GPU instance profiles ---- */

static nvmlReturn_t gi_profile_lookup(nvmlDevice_t device, unsigned profile, const fake_gi_profile_t **p)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    int enabled;
    nvmlReturn_t rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        return rc;
    enabled = s->mig_cur == 1;
    fake_state_close(&fake_state);
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!enabled)
        return NVML_ERROR_NOT_SUPPORTED;
    *p = fake_mig_by_index(g->mig, profile);
    return *p ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

/* the members every version of the profile info struct shares by name (v1, v2, v3: their layouts
 * differ - v3 has no isP2pSupported - so no struct is copied into another) */
#define FILL_GI_COUNTS(x, p)                \
    do {                                    \
        (x)->id = (p)->id;                  \
        (x)->sliceCount = (p)->slices;      \
        (x)->instanceCount = (p)->count;    \
        (x)->multiprocessorCount = (p)->sm; \
        (x)->copyEngineCount = (p)->ce;     \
        (x)->decoderCount = (p)->dec;       \
        (x)->encoderCount = (p)->enc;       \
        (x)->jpegCount = (p)->jpeg;         \
        (x)->ofaCount = (p)->ofa;           \
        (x)->memorySizeMB = (p)->mem_mb;    \
    } while (0)
/* and v2 and v3 also have the name */
#define FILL_GI_INFO(x, p)                                               \
    do {                                                                 \
        FILL_GI_COUNTS(x, p);                                            \
        snprintf((x)->name, sizeof((x)->name), "MIG %s", (p)->name);     \
    } while (0)

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info)
{
    const fake_gi_profile_t *p;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_profile_lookup(device, profile, &p);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!info)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    memset(info, 0, sizeof(*info)); /* isP2pSupported 0 */
    FILL_GI_COUNTS(info, p);
    API_RETURN(NVML_SUCCESS);
}

/* a GPU instance profile's info in the caller's struct version (v2, or v3 with capabilities) */
static nvmlReturn_t fill_gi_info(const fake_gi_profile_t *p, nvmlGpuInstanceProfileInfo_v2_t *info)
{
    if (info->version == nvmlGpuInstanceProfileInfo_v2) {
        memset(info, 0, sizeof(*info));
        info->version = nvmlGpuInstanceProfileInfo_v2;
        FILL_GI_INFO(info, p);
    } else if (info->version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        v3->version = nvmlGpuInstanceProfileInfo_v3;
        FILL_GI_INFO(v3, p);
        v3->capabilities = strstr(p->name, "+gfx") ? NVML_GPU_INSTANCE_PROFILE_CAPS_GFX : 0;
    } else {
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info)
{
    const fake_gi_profile_t *p;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_profile_lookup(device, profile, &p);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!info)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    API_RETURN(fill_gi_info(p, info));
}


/* the same information, looked up by profile ID (R550 and later drivers) */
nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoByIdV(nvmlDevice_t device, unsigned int profileId,
                                                      nvmlGpuInstanceProfileInfo_v2_t *info)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    const fake_gi_profile_t *p;
    int enabled;
    nvmlReturn_t rc;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    enabled = s->mig_cur == 1;
    fake_state_close(&fake_state);
    if (!info)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!enabled)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    p = fake_mig_by_id(g->mig, profileId);
    if (!p)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    API_RETURN(fill_gi_info(p, info));
}

static nvmlReturn_t placements(nvmlDevice_t device, unsigned int profileId,
                               nvmlGpuInstancePlacement_t *out, unsigned int *count)
{
    fake_gpu_t *g;
    const fake_gi_profile_t *p;
    nvmlReturn_t rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!g->mig)
        return NVML_ERROR_NOT_SUPPORTED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    p = fake_mig_by_id(g->mig, profileId);
    if (!p)
        return NVML_ERROR_NOT_SUPPORTED;
    if (out)
        for (unsigned k = 0; k < p->nstarts; k++) {
            out[k].start = p->starts[k];
            out[k].size = p->mem_slices;
        }
    *count = p->nstarts;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t *placementsOut,
                                                           unsigned int *count)
{
    API_ENTER();
    API_RETURN(placements(device, profileId, placementsOut, count));
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                        nvmlGpuInstancePlacement_t *placementsOut,
                                                        unsigned int *count)
{
    API_ENTER();
    API_RETURN(placements(device, profileId, placementsOut, count));
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int *count)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    const fake_gi_profile_t *p;
    nvmlReturn_t rc;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    p = fake_mig_by_id(g->mig, profileId);
    if (!count)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (s->mig_cur != 1 || !p)
        rc = NVML_ERROR_NOT_SUPPORTED;
    else
        *count = gi_capacity(g, s, p);
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

/* ---- GPU instances ---- */

/* How many placements of any profile that are free now an instance at start:size would take
 * away. The driver's automatic placement picks the free placement that costs the least (ties:
 * the lowest start); on A100/H100 this gives the order real drivers show for seven 1g
 * instances (GI ids 13, 11, 12, 7, 8, 9, 10: slots 6, 4, 5, 0, 1, 2, 3) and puts the first of
 * two 3g instances at 4:4. */
static unsigned damage(const fake_gpu_t *g, const fake_gpu_state_t *s, unsigned start, unsigned size)
{
    unsigned cost = 0, mask = ((1u << size) - 1) << start;
    for (unsigned i = 0; i < g->mig->nprofiles; i++) {
        const fake_gi_profile_t *q = &g->mig->profiles[i];
        for (unsigned k = 0; k < q->nstarts; k++) {
            unsigned m = ((1u << q->mem_slices) - 1) << q->starts[k];
            if (placement_free(s, q->starts[k], q->mem_slices) && (m & mask))
                cost++;
        }
    }
    return cost;
}

/* The id the driver gives a new GPU instance at start:size, by the profile's scheme
 * (mig_gi_ids); FAKE_MAX_GI when none is free. */
static unsigned new_gi_id(const fake_gpu_t *g, const fake_gpu_state_t *s, unsigned start, unsigned size)
{
    unsigned free_ids[FAKE_MAX_GI], nfree = 0;
    if (g->mig_gi_ids == GIID_PLACEMENT)
        return fake_mig_gi_id(start, size, g->mig->mem_slices);
    for (unsigned k = 1; k <= FAKE_MAX_GI; k++) {
        unsigned id = k % FAKE_MAX_GI; /* 1, 2, ..., 14, then 0 */
        if (!s->gi[id].used)
            free_ids[nfree++] = id;
    }
    if (!nfree)
        return FAKE_MAX_GI;
    if (g->mig_gi_ids == GIID_SEQUENTIAL)
        return free_ids[0];
    {
        char seed[160];
        unsigned long long h = 1469598103934665603ULL;
        snprintf(seed, sizeof(seed), "%s/%u/%u:%u", g->uuid, s->created, start, size);
        for (const char *c = seed; *c; c++)
            h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        return free_ids[(h >> 17) % nfree];
    }
}

static nvmlReturn_t create_gi(nvmlDevice_t device, unsigned int profileId,
                              const nvmlGpuInstancePlacement_t *placement, nvmlGpuInstance_t *gpuInstance)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    const fake_gi_profile_t *p;
    unsigned start = 0, id;
    int found = 0;
    nvmlReturn_t rc = mig_open(device, 1, &g, &s);
    if (rc != NVML_SUCCESS)
        return rc;
    p = fake_mig_by_id(g->mig, profileId);
    if (s->mig_cur != 1) {
        rc = NVML_ERROR_NOT_SUPPORTED;
        goto out;
    }
    if (!gpuInstance || !p) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    if (placement) {
        int valid = placement->size == p->mem_slices;
        for (unsigned k = 0; valid && k < p->nstarts; k++)
            if (p->starts[k] == placement->start)
                found = 1;
        if (!valid || !found) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
            goto out;
        }
        start = placement->start;
        found = placement_free(s, start, p->mem_slices);
    } else if (g->mig_auto_placement == AUTOPLACE_LEAST_DAMAGE) {
        int best = -1;
        unsigned best_cost = ~0u;
        for (unsigned k = 0; k < p->nstarts; k++) {
            unsigned cost;
            if (!placement_free(s, p->starts[k], p->mem_slices))
                continue;
            cost = damage(g, s, p->starts[k], p->mem_slices);
            if (cost < best_cost) {
                best_cost = cost;
                best = (int)p->starts[k];
            }
        }
        if (best >= 0) {
            start = (unsigned)best;
            found = 1;
        }
    } else if (g->mig_auto_placement == AUTOPLACE_LOWEST) {
        for (unsigned k = 0; k < p->nstarts && !found; k++)
            if (placement_free(s, p->starts[k], p->mem_slices)) {
                start = p->starts[k];
                found = 1;
            }
    } else {
        /* fill from the top so that large profiles keep room */
        for (unsigned k = p->nstarts; k-- > 0 && !found;)
            if (placement_free(s, p->starts[k], p->mem_slices)) {
                start = p->starts[k];
                found = 1;
            }
    }
    if (!found || count_profile(s, p->id) >= p->count ||
        used_slices(g, s) + p->slices > g->mig->compute_slices) {
        rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
        goto out;
    }
    id = new_gi_id(g, s, start, p->mem_slices);
    if (id >= FAKE_MAX_GI) {
        rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
        goto out;
    }
    memset(&s->gi[id], 0, sizeof(s->gi[id]));
    s->gi[id].used = 1;
    s->gi[id].profile_id = p->id;
    s->gi[id].start = start;
    s->gi[id].size = p->mem_slices;
    s->created++;
    rc = fake_state_commit(&fake_state);
    if (rc == NVML_SUCCESS)
        *gpuInstance = &fake_gi_handles[g - fake_node.gpus][id];
out:
    {
        char detail[64];
        snprintf(detail, sizeof(detail), "profile=%u placement=%s%u:%u", profileId, placement ? "" : "auto/",
                 placement ? placement->start : start, p ? p->mem_slices : 0);
        fake_call_log(placement ? "nvmlDeviceCreateGpuInstanceWithPlacement" : "nvmlDeviceCreateGpuInstance",
                      (int)(g - fake_node.gpus), detail, rc);
    }
    fake_state_close(&fake_state);
    return rc;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                         nvmlGpuInstance_t *gpuInstance)
{
    API_ENTER();
    API_RETURN(create_gi(device, profileId, NULL, gpuInstance));
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t *placement,
                                                      nvmlGpuInstance_t *gpuInstance)
{
    API_ENTER();
    if (!placement) {
        fake_gpu_t *g;
        nvmlReturn_t rc = fake_dev(device, 0, &g);
        API_RETURN(rc != NVML_SUCCESS ? rc : NVML_ERROR_INVALID_ARGUMENT);
    }
    API_RETURN(create_gi(device, profileId, placement, gpuInstance));
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance)
{
    gi_ctx_t c;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_open(gpuInstance, 1, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    for (unsigned b = 0; b < FAKE_MAX_CI; b++)
        if (c.rec->ci[b].used)
            rc = NVML_ERROR_IN_USE; /* compute instances still exist */
    if (fake_busy(c.g, c.s, (int)c.id, -1))
        rc = NVML_ERROR_IN_USE; /* a process runs on it */
    if (rc == NVML_SUCCESS) {
        memset(c.rec, 0, sizeof(*c.rec));
        rc = fake_state_commit(&fake_state);
    }
    {
        char detail[32];
        snprintf(detail, sizeof(detail), "gi=%u", c.id);
        fake_call_log(__func__, c.gpu, detail, rc);
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t *gpuInstances, unsigned int *count)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (s->mig_cur != 1) {
        rc = NVML_ERROR_NOT_SUPPORTED;
    } else if (!gpuInstances || !count || !fake_mig_by_id(g->mig, profileId)) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        unsigned n = 0;
        for (unsigned a = 0; a < FAKE_MAX_GI; a++)
            if (s->gi[a].used && s->gi[a].profile_id == profileId)
                gpuInstances[n++] = &fake_gi_handles[g - fake_node.gpus][a];
        *count = n;
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gpuInstance)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (s->mig_cur != 1)
        rc = NVML_ERROR_NOT_SUPPORTED;
    else if (!gpuInstance)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (id >= FAKE_MAX_GI || !s->gi[id].used)
        rc = NVML_ERROR_NOT_FOUND;
    else
        *gpuInstance = &fake_gi_handles[g - fake_node.gpus][id];
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t *info)
{
    gi_ctx_t c;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_open(gpuInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!info) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        memset(info, 0, sizeof(*info));
        info->device = &fake_dev_handles[c.gpu];
        info->id = c.id;
        info->profileId = c.rec->profile_id;
        info->placement.start = c.rec->start;
        info->placement.size = c.rec->size;
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

/* ---- compute instances ---- */

static unsigned sm_per_slice(const fake_gpu_t *g)
{
    const fake_gi_profile_t *one = fake_mig_by_index(g->mig, NVML_GPU_INSTANCE_PROFILE_1_SLICE);
    return one ? one->sm : 0;
}

static unsigned ci_mask(const fake_gi_rec_t *rec)
{
    unsigned m = 0;
    for (unsigned b = 0; b < FAKE_MAX_CI; b++)
        if (rec->ci[b].used)
            m |= ((1u << rec->ci[b].size) - 1) << rec->ci[b].start;
    return m;
}

static unsigned ci_free_count(const fake_gi_rec_t *rec, const fake_ci_profile_t *cp, int *first)
{
    unsigned n = 0, m = ci_mask(rec);
    *first = -1;
    for (unsigned k = 0; k < cp->nstarts; k++)
        if (!(m & (((1u << cp->slices) - 1) << cp->starts[k]))) {
            if (*first < 0)
                *first = (int)cp->starts[k];
            n++;
        }
    return n;
}

static nvmlReturn_t ci_profile_lookup(nvmlGpuInstance_t gpuInstance, unsigned profile, unsigned engProfile,
                                      gi_ctx_t *c, fake_ci_profile_t *cp)
{
    nvmlReturn_t rc = gi_open(gpuInstance, 0, c);
    if (rc != NVML_SUCCESS)
        return rc;
    fake_state_close(&fake_state);
    if (profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (fake_ci_profile(c->p, profile, cp) != 0)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

static void ci_name(const gi_ctx_t *c, const fake_ci_profile_t *cp, char *out, size_t len)
{
    if (cp->slices == c->p->slices)
        snprintf(out, len, "MIG %s", c->p->name);
    else
        snprintf(out, len, "MIG %uc.%s", cp->slices, c->p->name);
}

static unsigned ci_sm(const gi_ctx_t *c, const fake_ci_profile_t *cp)
{
    return cp->slices == c->p->slices ? c->p->sm : cp->slices * sm_per_slice(c->g);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    API_ENTER();
    rc = ci_profile_lookup(gpuInstance, profile, engProfile, &c, &cp);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!info)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    memset(info, 0, sizeof(*info));
    info->id = cp.index;
    info->sliceCount = cp.slices;
    info->instanceCount = cp.count;
    info->multiprocessorCount = ci_sm(&c, &cp);
    info->sharedCopyEngineCount = c.p->ce;
    info->sharedDecoderCount = c.p->dec;
    info->sharedEncoderCount = c.p->enc;
    info->sharedJpegCount = c.p->jpeg;
    info->sharedOfaCount = c.p->ofa;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                           unsigned int engProfile,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    API_ENTER();
    rc = ci_profile_lookup(gpuInstance, profile, engProfile, &c, &cp);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!info)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (info->version == nvmlComputeInstanceProfileInfo_v2) {
        memset(info, 0, sizeof(*info));
        info->version = nvmlComputeInstanceProfileInfo_v2;
        info->id = cp.index;
        info->sliceCount = cp.slices;
        info->instanceCount = cp.count;
        info->multiprocessorCount = ci_sm(&c, &cp);
        info->sharedCopyEngineCount = c.p->ce;
        info->sharedDecoderCount = c.p->dec;
        info->sharedEncoderCount = c.p->enc;
        info->sharedJpegCount = c.p->jpeg;
        info->sharedOfaCount = c.p->ofa;
        ci_name(&c, &cp, info->name, sizeof(info->name));
    } else if (info->version == nvmlComputeInstanceProfileInfo_v3) {
        nvmlComputeInstanceProfileInfo_v3_t *v3 = (nvmlComputeInstanceProfileInfo_v3_t *)info;
        memset(v3, 0, sizeof(*v3));
        v3->version = nvmlComputeInstanceProfileInfo_v3;
        v3->id = cp.index;
        v3->sliceCount = cp.slices;
        v3->instanceCount = cp.count;
        v3->multiprocessorCount = ci_sm(&c, &cp);
        v3->sharedCopyEngineCount = c.p->ce;
        v3->sharedDecoderCount = c.p->dec;
        v3->sharedEncoderCount = c.p->enc;
        v3->sharedJpegCount = c.p->jpeg;
        v3->sharedOfaCount = c.p->ofa;
        ci_name(&c, &cp, v3->name, sizeof(v3->name));
        v3->capabilities = 0;
    } else {
        API_RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId, unsigned int *count)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    int first;
    API_ENTER();
    rc = gi_open(gpuInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!count)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (fake_ci_profile(c.p, profileId, &cp) != 0)
        rc = NVML_ERROR_NOT_SUPPORTED;
    else
        *count = ci_free_count(c.rec, &cp, &first);
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

static nvmlReturn_t create_ci(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                              const nvmlComputeInstancePlacement_t *placement,
                              nvmlComputeInstance_t *computeInstance)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    int first = -1;
    unsigned id = 0, start = 0;
    char detail[64];
    rc = gi_open(gpuInstance, 1, &c);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!computeInstance || fake_ci_profile(c.p, profileId, &cp) != 0) {
        rc = !computeInstance ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
        goto out;
    }
    if (placement) {
        int valid = placement->size == cp.slices, known = 0;
        for (unsigned k = 0; valid && k < cp.nstarts; k++)
            known |= cp.starts[k] == placement->start;
        if (!valid || !known) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
            goto out;
        }
        if (ci_mask(c.rec) & (((1u << cp.slices) - 1) << placement->start)) {
            rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
            goto out;
        }
        start = placement->start;
    } else {
        if (ci_free_count(c.rec, &cp, &first) == 0) {
            rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
            goto out;
        }
        start = (unsigned)first;
    }
    while (id < FAKE_MAX_CI && c.rec->ci[id].used)
        id++;
    if (id >= FAKE_MAX_CI) {
        rc = NVML_ERROR_INSUFFICIENT_RESOURCES;
        goto out;
    }
    c.rec->ci[id].used = 1;
    c.rec->ci[id].profile_id = cp.index;
    c.rec->ci[id].start = start;
    c.rec->ci[id].size = cp.slices;
    rc = fake_state_commit(&fake_state);
    if (rc == NVML_SUCCESS)
        *computeInstance = &fake_ci_handles[c.gpu][c.id][id];
out:
    snprintf(detail, sizeof(detail), "gi=%u profile=%u placement=%s%u:%u", c.id, profileId,
             placement ? "" : "auto/", placement ? placement->start : start, cp.slices);
    fake_call_log(placement ? "nvmlGpuInstanceCreateComputeInstanceWithPlacement"
                            : "nvmlGpuInstanceCreateComputeInstance", c.gpu, detail, rc);
    fake_state_close(&fake_state);
    return rc;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                  nvmlComputeInstance_t *computeInstance)
{
    API_ENTER();
    API_RETURN(create_ci(gpuInstance, profileId, NULL, computeInstance));
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                               const nvmlComputeInstancePlacement_t *placement,
                                                               nvmlComputeInstance_t *computeInstance)
{
    API_ENTER();
    if (!placement)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    API_RETURN(create_ci(gpuInstance, profileId, placement, computeInstance));
}

/* every placement the compute instance profile has in the GPU instance, whether free or not
 * (as for GPU instances; creation fails on an occupied one) */
nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                                 nvmlComputeInstancePlacement_t *placements,
                                                                 unsigned int *count)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_open(gpuInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    fake_state_close(&fake_state);
    if (!count)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (fake_ci_profile(c.p, profileId, &cp) != 0)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    if (placements)
        for (unsigned k = 0; k < cp.nstarts; k++) {
            placements[k].start = cp.starts[k];
            placements[k].size = cp.slices;
        }
    *count = cp.nstarts;
    API_RETURN(NVML_SUCCESS);
}

typedef struct ci_ctx {
    gi_ctx_t gi;
    unsigned id;
    fake_ci_rec_t *rec;
} ci_ctx_t;

static nvmlReturn_t ci_open(nvmlComputeInstance_t computeInstance, int exclusive, ci_ctx_t *c)
{
    const struct nvmlComputeInstance_st *h = computeInstance;
    nvmlReturn_t rc;
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!IN_ARRAY(h, fake_ci_handles) ||
        ((uintptr_t)h - (uintptr_t)fake_ci_handles) % sizeof(*h))
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = gi_open(&fake_gi_handles[h->gpu][h->gi], exclusive, &c->gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!c->gi.rec->ci[h->ci].used) {
        fake_state_close(&fake_state);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    c->id = h->ci;
    c->rec = &c->gi.rec->ci[h->ci];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance)
{
    ci_ctx_t c;
    nvmlReturn_t rc;
    API_ENTER();
    rc = ci_open(computeInstance, 1, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (fake_busy(c.gi.g, c.gi.s, (int)c.gi.id, (int)c.id)) {
        rc = NVML_ERROR_IN_USE; /* a process runs on it */
    } else {
        memset(c.rec, 0, sizeof(*c.rec));
        rc = fake_state_commit(&fake_state);
    }
    {
        char detail[32];
        snprintf(detail, sizeof(detail), "gi=%u ci=%u", c.gi.id, c.id);
        fake_call_log(__func__, c.gi.gpu, detail, rc);
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                nvmlComputeInstance_t *computeInstances, unsigned int *count)
{
    gi_ctx_t c;
    fake_ci_profile_t cp;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_open(gpuInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!computeInstances || !count) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else if (fake_ci_profile(c.p, profileId, &cp) != 0) {
        rc = NVML_ERROR_NOT_SUPPORTED;
    } else {
        unsigned n = 0;
        for (unsigned b = 0; b < FAKE_MAX_CI; b++)
            if (c.rec->ci[b].used && c.rec->ci[b].profile_id == profileId)
                computeInstances[n++] = &fake_ci_handles[c.gpu][c.id][b];
        *count = n;
    }
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t *computeInstance)
{
    gi_ctx_t c;
    nvmlReturn_t rc;
    API_ENTER();
    rc = gi_open(gpuInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!computeInstance)
        rc = NVML_ERROR_INVALID_ARGUMENT;
    else if (id >= FAKE_MAX_CI || !c.rec->ci[id].used)
        rc = NVML_ERROR_NOT_FOUND;
    else
        *computeInstance = &fake_ci_handles[c.gpu][c.id][id];
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

static nvmlReturn_t ci_info(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    ci_ctx_t c;
    nvmlReturn_t rc = ci_open(computeInstance, 0, &c);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else {
        memset(info, 0, sizeof(*info));
        info->device = &fake_dev_handles[c.gi.gpu];
        info->gpuInstance = &fake_gi_handles[c.gi.gpu][c.gi.id];
        info->id = c.id;
        info->profileId = c.rec->profile_id;
        info->placement.start = c.rec->start;
        info->placement.size = c.rec->size;
    }
    fake_state_close(&fake_state);
    return rc;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    API_ENTER();
    API_RETURN(ci_info(computeInstance, info));
}

nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_t *info)
{
    API_ENTER();
    API_RETURN(ci_info(computeInstance, info));
}

/* ---- MIG device handles ---- */

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device, DEV_ALLOW_MIG | DEV_ALLOW_LOST, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!isMigDevice)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *isMigDevice = device->mig ? 1 : 0;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device, DEV_ALLOW_MIG, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!id || !device->mig)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *id = device->gi;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device, DEV_ALLOW_MIG, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!id || !device->mig)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *id = device->ci;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!count)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->mig) {
        *count = 0;
        API_RETURN(NVML_SUCCESS);
    }
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    *count = s->mig_cur == 1 ? g->mig->max_mig_devices : 0;
    fake_state_close(&fake_state);
    API_RETURN(NVML_SUCCESS);
}

/* the index of a MIG device handle within its parent, as nvmlDeviceGetMigDeviceHandleByIndex
 * numbers them (nvml.h, nvmlDeviceGetIndex: "When used with MIG device handles this API returns
 * indices that can be passed to nvmlDeviceGetMigDeviceHandleByIndex"); lock held */
nvmlReturn_t fake_mig_dev_index(const struct nvmlDevice_st *d, unsigned *index)
{
    fake_gpu_state_t *s;
    unsigned n = 0;
    nvmlReturn_t rc = fake_state_open(&fake_state, fake_node.state_path, 0);
    if (rc != NVML_SUCCESS)
        return rc;
    rc = NVML_ERROR_NOT_FOUND;
    s = fake_state_gpu(&fake_state, &fake_node.gpus[d->gpu]);
    for (unsigned a = 0; s && s->mig_cur == 1 && a < FAKE_MAX_GI; a++)
        for (unsigned b = 0; s->gi[a].used && b < FAKE_MAX_CI; b++) {
            if (!s->gi[a].ci[b].used || !fake_mig_visible(&fake_node.gpus[d->gpu], a, b))
                continue;
            if (&fake_mig_handles[d->gpu][a][b] == d) {
                *index = n;
                rc = NVML_SUCCESS;
                goto out;
            }
            n++;
        }
out:
    fake_state_close(&fake_state);
    return rc;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *migDevice)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlReturn_t rc;
    unsigned n = 0;
    API_ENTER();
    rc = mig_open(device, 0, &g, &s);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!migDevice || index >= g->mig->max_mig_devices) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
        goto out;
    }
    rc = NVML_ERROR_NOT_FOUND;
    if (s->mig_cur != 1)
        goto out;
    for (unsigned a = 0; a < FAKE_MAX_GI; a++)
        for (unsigned b = 0; s->gi[a].used && b < FAKE_MAX_CI; b++)
            if (s->gi[a].ci[b].used && fake_mig_visible(g, a, b) && n++ == index) {
                *migDevice = &fake_mig_handles[g - fake_node.gpus][a][b];
                rc = NVML_SUCCESS;
                goto out;
            }
out:
    fake_state_close(&fake_state);
    API_RETURN(rc);
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(migDevice, DEV_ALLOW_MIG, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!device || !migDevice->mig)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *device = &fake_dev_handles[migDevice->gpu];
    API_RETURN(NVML_SUCCESS);
}

/* Engine counts and sizes of a MIG device (NVML: "This API currently only supports MIG device
 * handles"): the compute instance's SMs and slices, its GPU instance's slices, shared engines
 * and memory. The device plugin and GPU Feature Discovery name MIG devices from these. */
static nvmlReturn_t mig_attributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    fake_gpu_t *g;
    const fake_gi_profile_t *p;
    unsigned ci_slices;
    nvmlReturn_t rc = fake_dev(device, DEV_ALLOW_MIG, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!attributes)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!device->mig)
        return NVML_ERROR_NOT_SUPPORTED;
    rc = fake_mig_dev_profile(device, &p, &ci_slices);
    if (rc != NVML_SUCCESS)
        return rc;
    memset(attributes, 0, sizeof(*attributes));
    attributes->multiprocessorCount = ci_slices == p->slices ? p->sm : ci_slices * sm_per_slice(g);
    attributes->sharedCopyEngineCount = p->ce;
    attributes->sharedDecoderCount = p->dec;
    attributes->sharedEncoderCount = p->enc;
    attributes->sharedJpegCount = p->jpeg;
    attributes->sharedOfaCount = p->ofa;
    attributes->gpuInstanceSliceCount = p->slices;
    attributes->computeInstanceSliceCount = ci_slices;
    attributes->memorySizeMB = p->mem_mb;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    API_ENTER();
    API_RETURN(mig_attributes(device, attributes));
}

nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    API_ENTER();
    API_RETURN(mig_attributes(device, attributes));
}
