/*
 * Device enumeration and per-device queries.
 */
#include "fake.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DEV_BEGIN(flags)                            \
    fake_gpu_t *g;                                  \
    nvmlReturn_t rc;                                \
    API_ENTER();                                    \
    rc = fake_dev(device, (flags), &g);             \
    if (rc != NVML_SUCCESS)                         \
        API_RETURN(rc)

#define NEED(ptr)                                   \
    do {                                            \
        if (!(ptr))                                 \
            API_RETURN(NVML_ERROR_INVALID_ARGUMENT); \
    } while (0)

/* MIG device helpers (api_mig.c) */
nvmlReturn_t fake_mig_dev_index(const struct nvmlDevice_st *d, unsigned *index);
nvmlReturn_t fake_mig_dev_profile(const struct nvmlDevice_st *d, const fake_gi_profile_t **gip,
                                  unsigned *ci_slices);

/* ---- enumeration ---- */

static nvmlReturn_t get_count(unsigned int *count)
{
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = fake_node.visible_count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    API_ENTER();
    API_RETURN(get_count(deviceCount));
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    API_ENTER();
    API_RETURN(get_count(deviceCount));
}

static nvmlReturn_t handle_for(unsigned idx, nvmlDevice_t *device)
{
    if (fake_node.gpus[idx].lost == LOST_ENUMERATION)
        return NVML_ERROR_GPU_IS_LOST;
    *device = &fake_dev_handles[idx];
    return NVML_SUCCESS;
}

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device)
{
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= fake_node.visible_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    return handle_for(fake_node.visible[index], device);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    API_ENTER();
    API_RETURN(by_index(index, device));
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    API_ENTER();
    API_RETURN(by_index(index, device));
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    API_ENTER();
    if (!fake_refcount)
        API_RETURN(NVML_ERROR_UNINITIALIZED);
    NEED(uuid && device);
    for (unsigned i = 0; i < fake_node.gpu_count; i++)
        if (!strcmp(fake_node.gpus[i].uuid, uuid) && fake_visible_index(i) >= 0)
            API_RETURN(handle_for(i, device));
    if (!strncmp(uuid, "MIG-", 4)) {
        nvmlReturn_t r = fake_state_open(&fake_state, fake_node.state_path, 0);
        if (r != NVML_SUCCESS)
            API_RETURN(r);
        for (unsigned i = 0; i < fake_node.gpu_count; i++) {
            const fake_gpu_t *g = &fake_node.gpus[i];
            const fake_gpu_state_t *s;
            if (!g->mig || g->lost != LOST_NO || fake_visible_index(i) < 0)
                continue;
            s = fake_state_gpu(&fake_state, g);
            if (!s || s->mig_cur != 1)
                continue;
            for (unsigned a = 0; a < FAKE_MAX_GI; a++)
                for (unsigned b = 0; s->gi[a].used && b < FAKE_MAX_CI; b++) {
                    char mu[FAKE_UUID_LEN];
                    if (!s->gi[a].ci[b].used || !fake_mig_visible(g, a, b))
                        continue;
                    fake_mig_uuid(g, a, b, mu, sizeof(mu));
                    if (!strcmp(mu, uuid)) {
                        fake_state_close(&fake_state);
                        *device = &fake_mig_handles[i][a][b];
                        API_RETURN(NVML_SUCCESS);
                    }
                }
        }
        fake_state_close(&fake_state);
    }
    API_RETURN(NVML_ERROR_NOT_FOUND);
}

static nvmlReturn_t by_bus_id(const char *busId, nvmlDevice_t *device)
{
    unsigned dom = 0, bus, dev, fn = 0;
    char tail;
    if (!fake_refcount)
        return NVML_ERROR_UNINITIALIZED;
    if (!busId || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sscanf(busId, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) {
        dom = 0;
        if (sscanf(busId, "%x:%x.%x%c", &bus, &dev, &fn, &tail) != 3)
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (unsigned i = 0; i < fake_node.gpu_count; i++) {
        const fake_gpu_t *g = &fake_node.gpus[i];
        if (g->domain == dom && g->bus == bus && g->dev == dev && g->func == fn && fake_visible_index(i) >= 0)
            return handle_for(i, device);
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device)
{
    API_ENTER();
    API_RETURN(by_bus_id(pciBusId, device));
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    API_ENTER();
    API_RETURN(by_bus_id(pciBusId, device));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEV_BEGIN(DEV_ALLOW_LOST | DEV_ALLOW_MIG);
    NEED(index);
    if (device->mig)
        API_RETURN(fake_mig_dev_index(device, index));
    *index = (unsigned)fake_visible_index((unsigned)(g - fake_node.gpus));
    API_RETURN(NVML_SUCCESS);
}

/* ---- identity ---- */

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(name);
    if (device->mig) {
        const fake_gi_profile_t *gp;
        unsigned cs;
        char buf[256];
        rc = fake_mig_dev_profile(device, &gp, &cs);
        if (rc != NVML_SUCCESS)
            API_RETURN(rc);
        if (cs == gp->slices)
            snprintf(buf, sizeof(buf), "%s MIG %s", g->name, gp->name);
        else
            snprintf(buf, sizeof(buf), "%s MIG %uc.%s", g->name, cs, gp->name);
        API_RETURN(fake_copy_str(name, length, buf));
    }
    API_RETURN(fake_copy_str(name, length, g->name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(uuid);
    if (device->mig) {
        char mu[FAKE_UUID_LEN];
        fake_mig_uuid(g, device->gi, device->ci, mu, sizeof(mu));
        API_RETURN(fake_copy_str(uuid, length, mu));
    }
    API_RETURN(fake_copy_str(uuid, length, g->uuid));
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length)
{
    DEV_BEGIN(0);
    NEED(serial);
    if (!g->serial[0])
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    API_RETURN(fake_copy_str(serial, length, g->serial));
}

nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *partNumber, unsigned int length)
{
    DEV_BEGIN(0);
    NEED(partNumber);
    if (!g->board_part[0])
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    API_RETURN(fake_copy_str(partNumber, length, g->board_part));
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *version, unsigned int length)
{
    DEV_BEGIN(0);
    NEED(version);
    API_RETURN(fake_copy_str(version, length, g->vbios));
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    fake_gpu_t *g;
    nvmlReturn_t rc = fake_dev(device, DEV_ALLOW_MIG | DEV_ALLOW_LOST, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_fill_pci(pci, g->domain, g->bus, g->dev, g->pci_device_id, g->pci_subsystem_id);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    API_ENTER();
    API_RETURN(pci_info(device, pci));
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    API_ENTER();
    API_RETURN(pci_info(device, pci));
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    API_ENTER();
    API_RETURN(pci_info(device, pci));
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minorNumber)
{
    DEV_BEGIN(0);
    NEED(minorNumber);
    *minorNumber = g->minor;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(major && minor);
    *major = g->cc_major;
    *minor = g->cc_minor;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(arch);
    *arch = g->arch;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(type);
    *type = (nvmlBrandType_t)g->brand;
    API_RETURN(NVML_SUCCESS);
}

/* Turing and newer; the struct's version must be nvmlDeviceAddressingMode_v1 */
nvmlReturn_t nvmlDeviceGetAddressingMode(nvmlDevice_t device, nvmlDeviceAddressingMode_t *mode)
{
    DEV_BEGIN(DEV_ALLOW_MIG); /* a MIG device shares its GPU's mode */
    NEED(mode);
    if (mode->version != nvmlDeviceAddressingMode_v1)
        API_RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (g->arch < NVML_DEVICE_ARCH_TURING)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    mode->value = (unsigned)g->addressing;
    API_RETURN(NVML_SUCCESS);
}

/* the lab's GPUs are bare metal, never vGPU or passthrough guests */
nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device, nvmlGpuVirtualizationMode_t *pVirtualMode)
{
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(pVirtualMode);
    *pVirtualMode = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    API_RETURN(NVML_SUCCESS);
}

/* ---- memory ---- */

static nvmlReturn_t mem_figures(nvmlDevice_t device, fake_gpu_t *g, unsigned long long *total,
                                unsigned long long *reserved, unsigned long long *used)
{
    if (device->mig) {
        const fake_gi_profile_t *gp;
        unsigned cs;
        nvmlReturn_t rc = fake_mig_dev_profile(device, &gp, &cs);
        if (rc != NVML_SUCCESS)
            return rc;
        *total = gp->mem_mb << 20;
        *reserved = 0;
        *used = 13ULL << 20; /* what an idle MIG device shows */
        return NVML_SUCCESS;
    }
    *total = g->mem_total;
    *reserved = g->mem_reserved;
    *used = g->mem_used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    unsigned long long total, reserved, used;
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(memory);
    rc = mem_figures(device, g, &total, &reserved, &used);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    /* v1: "used" includes the memory reserved by the driver/firmware */
    memory->total = total;
    memory->used = reserved + used;
    memory->free = total - reserved - used;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    unsigned long long total, reserved, used;
    DEV_BEGIN(DEV_ALLOW_MIG);
    NEED(memory);
    if (memory->version != nvmlMemory_v2)
        API_RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    rc = mem_figures(device, g, &total, &reserved, &used);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - reserved - used;
    API_RETURN(NVML_SUCCESS);
}

/* ---- power, thermals, clocks ---- */

/* the persistence mode: the profile's until nvmlDeviceSetPersistenceMode changes it (kept in the
 * state file, back to the profile's at a reboot) */
static int persistence_of(const fake_gpu_t *g)
{
    int v = g->persistence;
    if (fake_state_open(&fake_state, fake_node.state_path, 0) == NVML_SUCCESS) {
        fake_gpu_state_t *s = fake_state_gpu(&fake_state, g);
        if (s && s->persistence >= 0)
            v = s->persistence;
        fake_state_close(&fake_state);
    }
    return v;
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    DEV_BEGIN(0);
    NEED(mode);
    *mode = persistence_of(g) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    API_RETURN(NVML_SUCCESS);
}

/* root only, as the real call (NO_PERMISSION otherwise) */
nvmlReturn_t nvmlDeviceSetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t mode)
{
    fake_gpu_state_t *s;
    char detail[16];
    DEV_BEGIN(0);
    if (mode != NVML_FEATURE_ENABLED && mode != NVML_FEATURE_DISABLED)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (geteuid() != 0)
        API_RETURN(NVML_ERROR_NO_PERMISSION);
    rc = fake_state_open(&fake_state, fake_node.state_path, 1);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    s = fake_state_gpu(&fake_state, g);
    if (!s) {
        rc = NVML_ERROR_UNKNOWN;
    } else {
        s->persistence = mode == NVML_FEATURE_ENABLED;
        rc = fake_state_commit(&fake_state);
    }
    fake_state_close(&fake_state);
    snprintf(detail, sizeof(detail), "mode=%d", (int)mode);
    fake_call_log(__func__, (int)(g - fake_node.gpus), detail, rc);
    API_RETURN(rc);
}

/* The processes the lab marked busy on the GPU (gpuopsFakeNvmlSetBusy): on a GPU handle all of
 * them, on a MIG device handle those of its GPU/compute instance; clients are not processes. */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned kind, unsigned int *infoCount,
                                      nvmlProcessInfo_t *infos)
{
    fake_gpu_t *g;
    fake_gpu_state_t *s;
    nvmlProcessInfo_t found[FAKE_MAX_BUSY];
    unsigned n = 0;
    nvmlReturn_t rc = fake_dev(device, DEV_ALLOW_MIG, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = fake_state_open(&fake_state, fake_node.state_path, 0);
    if (rc != NVML_SUCCESS)
        return rc;
    s = fake_state_gpu(&fake_state, g);
    for (unsigned k = 0; s && k < FAKE_MAX_BUSY; k++) {
        const fake_busy_rec_t *b = &s->busy[k];
        if (!b->used || b->kind != kind)
            continue;
        if (device->mig && (b->gi != (int)device->gi || (b->ci >= 0 && b->ci != (int)device->ci)))
            continue;
        memset(&found[n], 0, sizeof(found[n]));
        found[n].pid = b->pid;
        found[n].usedGpuMemory = b->used_mib << 20;
        found[n].gpuInstanceId = b->gi < 0 ? 0xFFFFFFFFu : (unsigned)b->gi;
        found[n].computeInstanceId = b->ci < 0 ? 0xFFFFFFFFu : (unsigned)b->ci;
        n++;
    }
    fake_state_close(&fake_state);
    if (*infoCount < n) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (n && !infos)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned k = 0; k < n; k++)
        infos[k] = found[k];
    *infoCount = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                     nvmlProcessInfo_t *infos)
{
    API_ENTER();
    API_RETURN(running_processes(device, BUSY_COMPUTE, infoCount, infos));
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                      nvmlProcessInfo_t *infos)
{
    API_ENTER();
    API_RETURN(running_processes(device, BUSY_GRAPHICS, infoCount, infos));
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    DEV_BEGIN(0);
    NEED(power);
    *power = g->power_usage;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEV_BEGIN(0);
    NEED(limit);
    *limit = g->power_limit;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *limit)
{
    DEV_BEGIN(0);
    NEED(limit);
    *limit = g->power_mgmt_limit;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                      unsigned int *temp)
{
    DEV_BEGIN(0);
    NEED(temp);
    if ((unsigned)sensorType >= NVML_TEMPERATURE_COUNT)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (sensorType != NVML_TEMPERATURE_GPU)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *temp = g->temperature;
    API_RETURN(NVML_SUCCESS);
}

/* The shutdown, slowdown, memory and GPU max-operating limits nvidia-smi -q prints under
 * "Temperature"; a threshold the profile leaves out answers NOT_SUPPORTED, as on GPUs without
 * that sensor (nvml.h: nvmlDeviceGetTemperatureThreshold). */
nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t thresholdType,
                                               unsigned int *temp)
{
    DEV_BEGIN(0);
    NEED(temp);
    if ((unsigned)thresholdType >= NVML_TEMPERATURE_THRESHOLD_COUNT)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->temp_threshold[thresholdType])
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *temp = g->temp_threshold[thresholdType];
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    DEV_BEGIN(0);
    NEED(clock);
    if ((unsigned)type >= NVML_CLOCK_COUNT)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *clock = g->clock[type];
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    DEV_BEGIN(0);
    NEED(clock);
    if ((unsigned)type >= NVML_CLOCK_COUNT)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    *clock = g->max_clock[type];
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device,
                                                    unsigned long long *clocksEventReasons)
{
    DEV_BEGIN(0);
    NEED(clocksEventReasons);
    *clocksEventReasons = g->clock_reasons;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *clocksThrottleReasons)
{
    DEV_BEGIN(0);
    NEED(clocksThrottleReasons);
    *clocksThrottleReasons = g->clock_reasons;
    API_RETURN(NVML_SUCCESS);
}

/* ---- PCIe ---- */

#define UINT_GETTER(fn, arg, field)                             \
    nvmlReturn_t fn(nvmlDevice_t device, unsigned int *arg)     \
    {                                                           \
        DEV_BEGIN(0);                                           \
        NEED(arg);                                              \
        *arg = g->field;                                        \
        API_RETURN(NVML_SUCCESS);                               \
    }

UINT_GETTER(nvmlDeviceGetCurrPcieLinkGeneration, currLinkGen, pcie_gen_cur)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkGeneration, maxLinkGen, pcie_gen_max)
UINT_GETTER(nvmlDeviceGetGpuMaxPcieLinkGeneration, maxLinkGenDevice, pcie_gen_gpu_max)
UINT_GETTER(nvmlDeviceGetCurrPcieLinkWidth, currLinkWidth, pcie_width_cur)
UINT_GETTER(nvmlDeviceGetMaxPcieLinkWidth, maxLinkWidth, pcie_width_max)

/* ---- utilization, ECC, row remapping ---- */

/* Load figures (utilisation rates, encoder / decoder use) are not available per physical GPU
 * while MIG mode is on: NOT_SUPPORTED then, SUCCESS otherwise (or the state file's error). */
static nvmlReturn_t no_per_gpu_load_in_mig_mode(const fake_gpu_t *g)
{
    const fake_gpu_state_t *s;
    int mig_on;
    nvmlReturn_t r;
    if (!g->mig)
        return NVML_SUCCESS;
    r = fake_state_open(&fake_state, fake_node.state_path, 0);
    if (r != NVML_SUCCESS)
        return r;
    s = fake_state_gpu(&fake_state, g);
    mig_on = s && s->mig_cur == 1;
    fake_state_close(&fake_state);
    return mig_on ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

/* Encoder / decoder utilisation (percent) over the driver's sampling window; like the GPU's
 * utilisation rates, not available per physical GPU while MIG mode is on. */
static nvmlReturn_t codec_util(nvmlDevice_t device, int decoder, unsigned int *utilization,
                               unsigned int *samplingPeriodUs)
{
    fake_gpu_t *g;
    nvmlReturn_t rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!utilization || !samplingPeriodUs)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = no_per_gpu_load_in_mig_mode(g);
    if (rc != NVML_SUCCESS)
        return rc;
    *utilization = decoder ? g->util_dec : g->util_enc;
    *samplingPeriodUs = 1000000; /* a one-second window */
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    API_ENTER();
    API_RETURN(codec_util(device, 0, utilization, samplingPeriodUs));
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *utilization,
                                             unsigned int *samplingPeriodUs)
{
    API_ENTER();
    API_RETURN(codec_util(device, 1, utilization, samplingPeriodUs));
}

/* Millijoules since the driver was last loaded (NVML: Volta and later). */
nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    DEV_BEGIN(0);
    NEED(energy);
    if (g->arch < NVML_DEVICE_ARCH_VOLTA)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *energy = g->energy_mj;
    API_RETURN(NVML_SUCCESS);
}

/* PCIe replays: link-level retransmissions, a sign of a marginal link. */
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    DEV_BEGIN(0);
    NEED(value);
    *value = g->pcie_replays;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    DEV_BEGIN(0);
    NEED(utilization);
    rc = no_per_gpu_load_in_mig_mode(g);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    utilization->gpu = g->util_gpu;
    utilization->memory = g->util_mem;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current,
                                  nvmlEnableState_t *pending)
{
    DEV_BEGIN(0);
    NEED(current && pending);
    if (!g->ecc_supported)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *current = g->ecc_cur ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    *pending = g->ecc_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                         nvmlEccCounterType_t counterType,
                                         unsigned long long *eccCounts)
{
    DEV_BEGIN(0);
    NEED(eccCounts);
    if ((unsigned)errorType >= NVML_MEMORY_ERROR_TYPE_COUNT ||
        (unsigned)counterType >= NVML_ECC_COUNTER_TYPE_COUNT)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    if (!g->ecc_supported || !g->ecc_cur)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *eccCounts = g->ecc[errorType][counterType];
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows,
                                       unsigned int *uncRows, unsigned int *isPending,
                                       unsigned int *failureOccurred)
{
    DEV_BEGIN(0);
    NEED(corrRows && uncRows && isPending && failureOccurred);
    if (!g->remap_supported)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *corrRows = g->remap_corr;
    *uncRows = g->remap_unc;
    *isPending = g->remap_pending;
    *failureOccurred = g->remap_failure;
    API_RETURN(NVML_SUCCESS);
}

/* ---- NVLink, P2P, topology ---- */

static nvmlReturn_t check_link(const fake_gpu_t *g, unsigned link)
{
    if (!g->nvlink_count)
        return NVML_ERROR_NOT_SUPPORTED;
    if (link >= g->nvlink_count)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive)
{
    DEV_BEGIN(0);
    NEED(isActive);
    rc = check_link(g, link);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    *isActive = g->nvlink_down[link] ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType)
{
    DEV_BEGIN(0);
    NEED(pNvLinkDeviceType);
    rc = check_link(g, link);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    if (g->nvlink_down[link])
        *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
    else if (g->nvlink_remote == NVL_REMOTE_GPU)
        *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_GPU;
    else
        *pNvLinkDeviceType = NVML_NVLINK_DEVICE_TYPE_SWITCH;
    API_RETURN(NVML_SUCCESS);
}

static nvmlReturn_t remote_pci(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    fake_gpu_t *g;
    nvmlReturn_t rc = fake_dev(device, 0, &g);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = check_link(g, link);
    if (rc != NVML_SUCCESS)
        return rc;
    if (g->nvlink_down[link])
        return NVML_ERROR_NOT_SUPPORTED; /* nothing trained on the other end */
    if (g->nvlink_remote == NVL_REMOTE_GPU) {
        const fake_gpu_t *p = &fake_node.gpus[g->nvlink_peer];
        fake_fill_pci(pci, p->domain, p->bus, p->dev, p->pci_device_id, p->pci_subsystem_id);
    } else {
        unsigned sw = link * fake_node.nswitches / g->nvlink_count;
        fake_fill_pci(pci, fake_node.switch_domain[sw], fake_node.switch_bus[sw],
                      fake_node.switch_dev[sw], fake_node.switch_device_id, 0);
    }
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci)
{
    API_ENTER();
    API_RETURN(remote_pci(device, link, pci));
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                              nvmlPciInfo_t *pci)
{
    API_ENTER();
    API_RETURN(remote_pci(device, link, pci));
}

static int active_links(const fake_gpu_t *g)
{
    int n = 0;
    for (unsigned l = 0; l < g->nvlink_count; l++)
        n += !g->nvlink_down[l];
    return n;
}

static int nvlink_connected(const fake_gpu_t *a, const fake_gpu_t *b)
{
    int ia = (int)(a - fake_node.gpus), ib = (int)(b - fake_node.gpus);
    if (!active_links(a) || !active_links(b))
        return 0;
    if (a->nvlink_remote == NVL_REMOTE_SWITCH && b->nvlink_remote == NVL_REMOTE_SWITCH)
        return 1;
    return a->nvlink_remote == NVL_REMOTE_GPU && b->nvlink_remote == NVL_REMOTE_GPU &&
           a->nvlink_peer == ib && b->nvlink_peer == ia;
}

nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2,
                                    nvmlGpuP2PCapsIndex_t p2pIndex, nvmlGpuP2PStatus_t *p2pStatus)
{
    fake_gpu_t *a, *b;
    nvmlReturn_t rc;
    int nvl;
    API_ENTER();
    rc = fake_dev(device1, 0, &a);
    if (rc == NVML_SUCCESS)
        rc = fake_dev(device2, 0, &b);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    NEED(p2pStatus);
    if ((unsigned)p2pIndex >= NVML_P2P_CAPS_INDEX_UNKNOWN || a == b)
        API_RETURN(NVML_ERROR_INVALID_ARGUMENT);
    nvl = nvlink_connected(a, b);
    switch (p2pIndex) {
    case NVML_P2P_CAPS_INDEX_NVLINK:
        *p2pStatus = nvl ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
        break;
    case NVML_P2P_CAPS_INDEX_ATOMICS:
        *p2pStatus = nvl ? NVML_P2P_STATUS_OK : NVML_P2P_STATUS_NOT_SUPPORTED;
        break;
    case NVML_P2P_CAPS_INDEX_PCI:
        *p2pStatus = (nvmlGpuP2PStatus_t)fake_node.p2p_pcie;
        break;
    default: /* read / write */
        *p2pStatus = nvl ? NVML_P2P_STATUS_OK : (nvmlGpuP2PStatus_t)fake_node.p2p_pcie;
        break;
    }
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo)
{
    fake_gpu_t *a, *b;
    nvmlReturn_t rc;
    API_ENTER();
    rc = fake_dev(device1, 0, &a);
    if (rc == NVML_SUCCESS)
        rc = fake_dev(device2, 0, &b);
    if (rc != NVML_SUCCESS)
        API_RETURN(rc);
    NEED(pathInfo);
    if (a == b)
        *pathInfo = NVML_TOPOLOGY_INTERNAL;
    else if (a->pcie_switch >= 0 && a->pcie_switch == b->pcie_switch)
        *pathInfo = NVML_TOPOLOGY_SINGLE;
    else if ((a->numa_node < 0 ? 0 : a->numa_node) == (b->numa_node < 0 ? 0 : b->numa_node))
        *pathInfo = NVML_TOPOLOGY_NODE;
    else
        *pathInfo = NVML_TOPOLOGY_SYSTEM;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetNumaNodeId(nvmlDevice_t device, unsigned int *node)
{
    DEV_BEGIN(0);
    NEED(node);
    if (g->numa_node < 0)
        API_RETURN(NVML_ERROR_NOT_SUPPORTED);
    *node = (unsigned)g->numa_node;
    API_RETURN(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int cpuSetSize, unsigned long *cpuSet)
{
    DEV_BEGIN(0);
    NEED(cpuSet && cpuSetSize);
    for (unsigned w = 0; w < cpuSetSize; w++) {
        unsigned long m = 0;
        if (w < FAKE_CPUSET_WORDS) {
            if (g->numa_node >= 0)
                m = fake_node.numa_cpus[g->numa_node][w];
            else
                for (int k = 0; k < FAKE_MAX_NUMA; k++)
                    m |= fake_node.numa_cpus[k][w];
        }
        cpuSet[w] = m;
    }
    API_RETURN(NVML_SUCCESS);
}
