/*
 * Event sets. XID events listed in the profile ("xid_events") are queued
 * once per event set when a device registers nvmlEventTypeXidCriticalError;
 * XIDs the lab injects later (gpuopsFakeNvmlInjectXid, kept in the state
 * file until the GPU's reset) are delivered by the waits that follow; with
 * nothing to deliver, waits time out.
 */
#include "fake.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define QMAX (FAKE_MAX_GPUS * FAKE_MAX_XIDS)

struct nvmlEventSet_st {
    struct nvmlEventSet_st *next;
    unsigned long long registered[FAKE_MAX_GPUS];
    unsigned seen[FAKE_MAX_GPUS]; /* injected XIDs of each GPU already delivered (or before registering) */
    unsigned head, tail;
    struct {
        int gpu;
        unsigned long long type, data;
    } q[QMAX];
};

static struct nvmlEventSet_st *sets;

/* the number of XIDs injected on GPU g since its reset (state file); with out, copies up to max of them */
static unsigned injected(const fake_gpu_t *g, unsigned *out, unsigned max)
{
    unsigned n = 0;
    if (fake_state_open(&fake_state, fake_node.state_path, 0) == NVML_SUCCESS) {
        fake_gpu_state_t *s = fake_state_gpu(&fake_state, g);
        if (s) {
            n = s->nxid;
            for (unsigned k = 0; out && k < n && k < max; k++)
                out[k] = s->xid[k];
        }
    }
    fake_state_close(&fake_state);
    return n;
}

static int set_valid(nvmlEventSet_t set)
{
    for (struct nvmlEventSet_st *s = sets; s; s = s->next)
        if (s == set)
            return 1;
    return 0;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    struct nvmlEventSet_st *s;
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    if (!set)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    s = calloc(1, sizeof(*s));
    if (!s)
        API_RETURN(NVML_ERROR_MEMORY);
    s->next = sets;
    sets = s;
    *set = s;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    struct nvmlEventSet_st **pp;
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    for (pp = &sets; *pp; pp = &(*pp)->next)
        if (*pp == set) {
            *pp = set->next;
            free(set);
            API_RETURN(NVML_SUCCESS);
        }
    API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!eventTypes)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *eventTypes = g->supported_events;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    fake_gpu_t *g;
    nvmlReturn_t rc;
    int idx;
    API_ENTER();
    rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (!set_valid(set))
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (eventTypes & ~g->supported_events)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    idx = (int)(g - fake_node.gpus);
    if ((eventTypes & nvmlEventTypeXidCriticalError) &&
        !(set->registered[idx] & nvmlEventTypeXidCriticalError)) {
        /* XIDs injected before the registration are not this set's */
        set->seen[idx] = injected(g, NULL, 0);
        for (unsigned k = 0; k < g->nxids && set->tail < QMAX; k++) {
            set->q[set->tail].gpu = idx;
            set->q[set->tail].type = nvmlEventTypeXidCriticalError;
            set->q[set->tail].data = g->xids[k];
            set->tail++;
        }
    }
    set->registered[idx] |= eventTypes;
    API_RETURN(NVML_SUCCESS);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static nvmlReturn_t wait_event(nvmlEventSet_t set, nvmlEventData_t *data, int v2)
{
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!data || !set_valid(set))
        return NVML_ERROR_INVALID_ARGUMENT;
    /* drop events of GPUs that a re-init with a smaller profile removed */
    while (set->head < set->tail && (unsigned)set->q[set->head].gpu >= fake_node.gpu_count)
        set->head++;
    if (set->head == set->tail) {
        /* the XIDs injected since the last wait, of the GPUs registered for them */
        set->head = set->tail = 0;
        for (unsigned i = 0; i < fake_node.gpu_count && i < FAKE_MAX_GPUS; i++) {
            unsigned xids[FAKE_MAX_XIDS], n;
            if (!(set->registered[i] & nvmlEventTypeXidCriticalError))
                continue;
            n = injected(&fake_node.gpus[i], xids, FAKE_MAX_XIDS);
            if (n < set->seen[i]) /* reset since: what comes now is new */
                set->seen[i] = 0;
            for (unsigned k = set->seen[i]; k < n && set->tail < QMAX; k++) {
                set->q[set->tail].gpu = (int)i;
                set->q[set->tail].type = nvmlEventTypeXidCriticalError;
                set->q[set->tail].data = xids[k];
                set->tail++;
            }
            set->seen[i] = n;
        }
    }
    if (set->head < set->tail) {
        int gpu = set->q[set->head].gpu;
        data->device = &fake_dev_handles[gpu];
        data->eventType = set->q[set->head].type;
        data->eventData = set->q[set->head].data;
        if (v2) {
            /* not attributable to a MIG instance */
            data->gpuInstanceId = 0xFFFFFFFFu;
            data->computeInstanceId = 0xFFFFFFFFu;
        }
        set->head++;
        return NVML_SUCCESS;
    }
    return NVML_ERROR_TIMEOUT;
}

static nvmlReturn_t wait_common(nvmlEventSet_t set, nvmlEventData_t *data, unsigned timeoutms, int v2)
{
    nvmlReturn_t r;
    pthread_mutex_lock(&fake_lock);
    r = wait_event(set, data, v2);
    pthread_mutex_unlock(&fake_lock);
    if (r == NVML_ERROR_TIMEOUT)
        sleep_ms(timeoutms); /* nothing will ever arrive: wait out the timeout */
    return r;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    fake_trace(__func__);
    return wait_common(set, data, timeoutms, 1);
}

/* legacy v1: its nvmlEventData_t had no gpuInstanceId/computeInstanceId */
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    fake_trace(__func__);
    return wait_common(set, data, timeoutms, 0);
}
