/*
 * gpuops fake NVML - internal declarations.
 *
 * Every exported function is defined with the exact prototype from NVIDIA's
 * nvml.h, which is included here with default visibility; everything else in
 * the library is hidden (-fvisibility=hidden).
 */
#ifndef GPUOPS_FAKE_NVML_H
#define GPUOPS_FAKE_NVML_H

/* also declare the legacy unversioned entry points (nvmlInit, ...) so that
 * their definitions are checked against the header as well */
#define NVML_NO_UNVERSIONED_FUNC_DEFS 1

#pragma GCC visibility push(default)
#include <nvml.h>
/* test hooks of the fake (not part of NVML) */
int gpuopsFakeNvmlSimulateReboot(void);
int gpuopsFakeNvmlResetGpu(const char *uuid);
int gpuopsFakeNvmlSetBusy(const char *uuid, int gi, int ci, unsigned int pid, const char *kind,
                          unsigned long long usedMiB, const char *name);
int gpuopsFakeNvmlClearBusy(const char *uuid, unsigned int pid);
int gpuopsFakeNvmlInjectXid(const char *uuid, unsigned int xid);
int gpuopsFakeNvmlCalledFunctions(char *buf, unsigned int size);
int gpuopsFakeNvmlDescribe(char *buf, unsigned int size);
#pragma GCC visibility pop

#include <pthread.h>
#include <stddef.h>

#define FAKE_MAX_GPUS 16
#define FAKE_MAX_LINKS NVML_NVLINK_MAX_LINKS
#define FAKE_MAX_XIDS 16
#define FAKE_MAX_NUMA 8
#define FAKE_CPUSET_WORDS 16 /* 1024 logical CPUs */
#define FAKE_MAX_SWITCHES 8
#define FAKE_MAX_GI 15       /* GPU instance ids 0..14 */
#define FAKE_MAX_CI 8        /* compute instance ids 0..7 */
#define FAKE_UUID_LEN NVML_DEVICE_UUID_V2_BUFFER_SIZE

enum { DRV_LOADED, DRV_NOT_LOADED, DRV_VERSION_MISMATCH };
enum { LOST_NO, LOST_QUERIES, LOST_ENUMERATION };
/* how a MIG mode change takes effect (profile key mig_mode_change, "auto" by architecture):
 *  IMMEDIATE  Hopper and later: applies at once, without a reset, and is gone after a GPU reset
 *             or a reboot (the GPU comes back with its boot mode);
 *  RESET      Ampere: applies through a GPU reset, which NVML does itself when no client holds
 *             the GPU (else the change stays pending, activation status IN_USE); persists;
 *  PENDING    Ampere where NVML cannot reset the GPU (pass-through VMs): always pending,
 *             activation status RESET_REQUIRED, until a GPU reset or a reboot; persists;
 *  IN_USE     Ampere held by a client the node cannot stop: pending, IN_USE; a GPU reset fails
 *             IN_USE; a reboot applies it; persists. */
enum { MIGCHG_IMMEDIATE, MIGCHG_PENDING, MIGCHG_IN_USE, MIGCHG_RESET, MIGCHG_AUTO };
/* GPU instance ids the driver hands out (profile key mig_gi_ids): by placement (0 = 0:8,
 * 1-2 = x:4, 3-6 = x:2, 7-14 = x:1), the lowest free id from 1, or a shuffled free id */
enum { GIID_PLACEMENT, GIID_SEQUENTIAL, GIID_SHUFFLED };
/* where the driver puts a GPU instance created without a placement (mig_auto_placement) */
enum { AUTOPLACE_LEAST_DAMAGE, AUTOPLACE_HIGHEST, AUTOPLACE_LOWEST };
enum { NVL_REMOTE_SWITCH, NVL_REMOTE_GPU };

typedef struct fake_mig_table fake_mig_table_t;

typedef struct fake_gpu {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[FAKE_UUID_LEN];
    char serial[NVML_DEVICE_SERIAL_BUFFER_SIZE];
    char board_part[NVML_DEVICE_PART_NUMBER_BUFFER_SIZE];
    char vbios[NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE];
    unsigned domain, bus, dev, func;
    unsigned pci_device_id, pci_subsystem_id;
    unsigned minor;
    unsigned long long mem_total, mem_reserved, mem_used; /* bytes */
    int cc_major, cc_minor;
    unsigned arch;
    int brand;          /* nvmlBrandType_t (profile key brand, default nvidia) */
    int addressing;     /* nvmlDeviceAddressingModeType_t (profile key addressing_mode, default none) */
    int persistence;
    unsigned power_usage, power_limit, power_mgmt_limit; /* mW */
    unsigned temperature;
    /* NVML temperature thresholds by nvmlTemperatureThresholds_t (0: NOT_SUPPORTED) */
    unsigned temp_threshold[NVML_TEMPERATURE_THRESHOLD_COUNT];
    unsigned clock[NVML_CLOCK_COUNT], max_clock[NVML_CLOCK_COUNT];
    unsigned pcie_gen_cur, pcie_gen_max, pcie_gen_gpu_max;
    unsigned pcie_width_cur, pcie_width_max;
    unsigned util_gpu, util_mem, util_enc, util_dec;
    unsigned long long energy_mj; /* since the driver was loaded */
    unsigned pcie_replays;
    int ecc_supported, ecc_cur, ecc_pending;
    unsigned long long ecc[NVML_MEMORY_ERROR_TYPE_COUNT][NVML_ECC_COUNTER_TYPE_COUNT];
    int remap_supported;
    unsigned remap_corr, remap_unc, remap_pending, remap_failure;
    unsigned long long clock_reasons;
    unsigned nvlink_count;
    int nvlink_remote;
    int nvlink_peer;
    unsigned char nvlink_down[FAKE_MAX_LINKS];
    int numa_node;   /* -1: NVML reports NOT_SUPPORTED */
    int pcie_switch; /* -1: own switch */
    unsigned long long supported_events;
    unsigned xids[FAKE_MAX_XIDS];
    unsigned nxids;
    int lost;
    const fake_mig_table_t *mig; /* NULL: no MIG support */
    int mig_mode_default;
    int mig_change;
    int mig_gi_ids;
    int mig_auto_placement;
} fake_gpu_t;

typedef struct fake_node {
    char description[256];
    char profile_path[1024];
    char state_path[1024];
    char root[64]; /* "" or the node's root reached through the driver channel (channel.c) */
    int driver_state;
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    char nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    int cuda_version;
    unsigned gpu_count;
    unsigned long numa_cpus[FAKE_MAX_NUMA][FAKE_CPUSET_WORDS];
    unsigned nswitches;
    unsigned switch_domain[FAKE_MAX_SWITCHES], switch_bus[FAKE_MAX_SWITCHES],
        switch_dev[FAKE_MAX_SWITCHES];
    unsigned switch_device_id;
    int p2p_pcie; /* nvmlGpuP2PStatus_t */
    fake_gpu_t gpus[FAKE_MAX_GPUS];
    /* the GPUs this process may see, in index order: all of them on the node; in a container
     * (driver channel) only those whose /dev/nvidiaN the runtime injected (profile.c) */
    unsigned visible_count;
    unsigned visible[FAKE_MAX_GPUS];
} fake_node_t;

/* the NVML index of node GPU I for this process, or -1 when the process cannot see it */
int fake_visible_index(unsigned i);
/* whether the process may use that MIG device (its capability nodes; profile.c) */
int fake_mig_visible(const fake_gpu_t *g, unsigned gi, unsigned ci);

/* ---- MIG tables (mig_tables.c) ---- */
typedef struct fake_gi_profile {
    unsigned index;      /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;         /* profile ID */
    const char *name;    /* e.g. "1g.10gb" */
    unsigned slices;     /* compute slices */
    unsigned mem_slices; /* placement size (memory slices out of 8) */
    unsigned count;      /* max instances */
    unsigned sm, ce, dec, enc, jpeg, ofa;
    unsigned long long mem_mb;
    unsigned nstarts;
    unsigned starts[8];
} fake_gi_profile_t;

struct fake_mig_table {
    const char *key;
    unsigned max_mig_devices;
    unsigned nprofiles;
    const fake_gi_profile_t *profiles;
    unsigned compute_slices; /* 7 on A100/H100/H200/B200, 4 on RTX PRO 6000 */
    unsigned mem_slices;     /* 8, or 4 */
};

const fake_mig_table_t *fake_mig_table_find(const char *key);
const fake_gi_profile_t *fake_mig_by_index(const fake_mig_table_t *t, unsigned index);
const fake_gi_profile_t *fake_mig_by_id(const fake_mig_table_t *t, unsigned id);
unsigned fake_mig_gi_id(unsigned start, unsigned size, unsigned mem_slices); /* GI id from placement */
const char *fake_mig_table_keys(void);

/* compute instance profiles inside a GPU instance */
typedef struct fake_ci_profile {
    unsigned index;  /* == profile ID */
    unsigned slices;
    unsigned count;
    unsigned nstarts;
    unsigned starts[8];
} fake_ci_profile_t;
int fake_ci_profile(const fake_gi_profile_t *gi, unsigned index, fake_ci_profile_t *out);

/* ---- profile loading (profile.c) ---- */
/* loads the profile named by the environment (or the installed default) into
 * *node; returns NVML_SUCCESS, NVML_ERROR_DRIVER_NOT_LOADED when no profile
 * can be read, NVML_ERROR_UNKNOWN on syntax/validation errors (reported on
 * stderr). */
nvmlReturn_t fake_profile_load(fake_node_t *node);
/* "" or "/proc/self/fd/N": the lab node's root, from the simulated driver's socket (channel.c) */
void fake_channel_root(char *out, size_t len);

/* ---- MIG state file (state.c) ---- */
typedef struct fake_ci_rec {
    unsigned used, profile_id, start, size;
} fake_ci_rec_t;
typedef struct fake_gi_rec {
    unsigned used, profile_id, start, size;
    fake_ci_rec_t ci[FAKE_MAX_CI];
} fake_gi_rec_t;
/* something holding a GPU, GPU instance or compute instance: a process (listed by
 * nvmlDeviceGetComputeRunningProcesses / GetGraphicsRunningProcesses) or a client such as
 * nvidia-persistenced or DCGM (holds the GPU, lists no process) */
#define FAKE_MAX_BUSY 16
enum { BUSY_COMPUTE, BUSY_GRAPHICS, BUSY_CLIENT };
typedef struct fake_busy_rec {
    unsigned used, pid, kind;
    int gi, ci; /* -1: the whole GPU */
    unsigned long long used_mib;
    char name[64];
} fake_busy_rec_t;
typedef struct fake_gpu_state {
    char uuid[FAKE_UUID_LEN];
    int mig_cur, mig_pend;
    int persistence; /* -1: the profile's */
    unsigned created; /* GPU instances created since boot (drives the shuffled id scheme) */
    fake_gi_rec_t gi[FAKE_MAX_GI];
    fake_busy_rec_t busy[FAKE_MAX_BUSY];
    /* XIDs the lab injected since the GPU's last reset or the node's boot (gpuopsFakeNvmlInjectXid),
     * oldest first: event sets deliver those injected after they registered */
    unsigned xid[FAKE_MAX_XIDS];
    unsigned nxid;
} fake_gpu_state_t;

#define FAKE_STATE_MAX 64
typedef struct fake_state {
    unsigned n;
    fake_gpu_state_t g[FAKE_STATE_MAX];
    int lockfd;
    int writable;
    char path[1024];
} fake_state_t;

nvmlReturn_t fake_state_open(fake_state_t *st, const char *path, int exclusive);
nvmlReturn_t fake_state_commit(fake_state_t *st);
void fake_state_close(fake_state_t *st);
fake_gpu_state_t *fake_state_gpu(fake_state_t *st, const fake_gpu_t *g);

/* ---- library core (core.c) ---- */
extern pthread_mutex_t fake_lock;
extern fake_node_t fake_node;
extern int fake_refcount;
extern fake_state_t fake_state;

void fake_trace(const char *fn);
/* the error a GPUOPS_FAKE_NVML_FAULTS entry injects into this call of fn, or NVML_SUCCESS */
nvmlReturn_t fake_fault(const char *fn);
/* appends "fn gpu detail rc" to GPUOPS_FAKE_NVML_CALL_LOG (mutating calls) */
void fake_call_log(const char *fn, int gpu, const char *detail, nvmlReturn_t rc);
/* a GPU reset / a reboot of GPU g, on its state record s (state file open exclusively) */
nvmlReturn_t fake_gpu_reset(const fake_gpu_t *g, fake_gpu_state_t *s);
void fake_gpu_reboot(const fake_gpu_t *g, fake_gpu_state_t *s);
/* whether anything holds the GPU (gi/ci -1: anywhere on it) */
int fake_busy(const fake_gpu_t *g, const fake_gpu_state_t *s, int gi, int ci);

#define API_ENTER()                                  \
    do {                                             \
        nvmlReturn_t fault__;                        \
        fake_trace(__func__);                        \
        fault__ = fake_fault(__func__);              \
        if (fault__ != NVML_SUCCESS)                 \
            return fault__;                          \
        pthread_mutex_lock(&fake_lock);              \
    } while (0)
#define API_RETURN(x)                        \
    do {                                     \
        nvmlReturn_t r__ = (x);              \
        pthread_mutex_unlock(&fake_lock);    \
        return r__;                          \
    } while (0)

struct nvmlDevice_st {
    int gpu;
    int mig; /* 1: MIG device handle */
    unsigned gi, ci;
};
struct nvmlGpuInstance_st {
    int gpu;
    unsigned gi;
};
struct nvmlComputeInstance_st {
    int gpu;
    unsigned gi, ci;
};

extern struct nvmlDevice_st fake_dev_handles[FAKE_MAX_GPUS];
extern struct nvmlDevice_st fake_mig_handles[FAKE_MAX_GPUS][FAKE_MAX_GI][FAKE_MAX_CI];
extern struct nvmlGpuInstance_st fake_gi_handles[FAKE_MAX_GPUS][FAKE_MAX_GI];
extern struct nvmlComputeInstance_st fake_ci_handles[FAKE_MAX_GPUS][FAKE_MAX_GI][FAKE_MAX_CI];

/* flags for fake_dev() */
#define DEV_ALLOW_MIG 0x1  /* accept MIG device handles (resolved to the parent) */
#define DEV_ALLOW_LOST 0x2 /* still answer for a lost GPU */

/* validates a device handle (library must be initialized; lock held) */
nvmlReturn_t fake_dev(nvmlDevice_t device, int flags, fake_gpu_t **gpu);
/* validates a MIG device handle against the current state */
int fake_mig_dev_exists(const struct nvmlDevice_st *d);
nvmlReturn_t fake_copy_str(char *dst, unsigned int length, const char *src);
void fake_mig_uuid(const fake_gpu_t *g, unsigned gi, unsigned ci, char *out, size_t len);
void fake_hash_uuid(const char *prefix, const char *seed, char *out, size_t len);
void fake_fill_pci(nvmlPciInfo_t *pci, unsigned domain, unsigned bus, unsigned dev,
                   unsigned device_id, unsigned subsys_id);

#endif
