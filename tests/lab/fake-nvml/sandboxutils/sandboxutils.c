/*
 * gpuops fake libnvidia-sandboxutils.so.1 - the driver's "sandbox utilities"
 * library for the lab's simulated nodes.
 *
 * Recent NVIDIA drivers (the lab: R565 and later) ship libnvidia-sandboxutils, and
 * nvidia-ctk (NVIDIA Container Toolkit 1.18) asks it, when it is present, which
 * device nodes belong to a GPU or MIG device (internal/platform-support/dgpu/
 * nvsandboxutils.go of the toolkit); without it the toolkit reads the MIG
 * capability minors from /proc/driver/nvidia-caps/mig-minors, which no lab node
 * can have (runc refuses mounts under /proc, and an unprivileged container
 * cannot mount over it).
 *
 * Every exported function is defined with the prototype from NVIDIA's
 * nvsandboxutils.h (the header the toolkit's Go bindings are generated from,
 * read from the toolkit's Go module at build time). The library answers from
 * the fake NVML it links against (the same libnvidia-ml.so.1 the caller has
 * loaded), and lists only the files that exist under the root given to
 * nvSandboxUtilsInit.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nvml.h>

#pragma GCC visibility push(default)
#include <nvsandboxutils.h>
#pragma GCC visibility pop

/* The minors the NVIDIA kernel module gives its capability devices
 * (/dev/nvidia-caps/nvidia-capN): one table, numbered in order, of the
 * fabric-mgmt capability (0), mig/config (1), mig/monitor (2), then for each
 * of 32 GPU minors and each of 15 GPU instances "giG/access" followed by
 * "giG/ci0/access" .. "ci7/access" (kernel-open/nvidia/nv-caps.c of NVIDIA's
 * open-gpu-kernel-modules: g_nv_cap_mig_gpu_table and _nv_cap_table_init).
 * /proc/driver/nvidia-caps/mig-minors lists the same numbers, e.g.
 * "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4", "gpu3/gi3/ci3/access 439". */
#define CAP_MIG_FIRST 3
#define CAP_PER_GI 9
#define CAP_PER_GPU (15 * CAP_PER_GI)
#define CAP_MAX_GPU 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int refcount;
static char root[INPUT_LENGTH];

/* every list handed out stays valid until the last nvSandboxUtilsShutdown */
typedef struct node {
    nvSandboxUtilsGpuFileInfo_v1_t info;
    char path[MAX_FILE_PATH];
    struct node *owned; /* all nodes ever allocated, for shutdown */
} node_t;
static node_t *owned;

static void free_all(void)
{
    while (owned) {
        node_t *next = owned->owned;
        free(owned);
        owned = next;
    }
}

static int cap_minor_gi(unsigned gpu_minor, unsigned gi)
{
    return CAP_MIG_FIRST + (int)(gpu_minor * CAP_PER_GPU + gi * CAP_PER_GI);
}

static int cap_minor_ci(unsigned gpu_minor, unsigned gi, unsigned ci)
{
    return cap_minor_gi(gpu_minor, gi) + 1 + (int)ci;
}

/* the list being built: pos is the next pointer to fill */
typedef struct cursor {
    nvSandboxUtilsGpuFileInfo_v1_t **pos;
} cursor_t;

/* appends ROOT/rel to the list when it exists (a file that is not there is
 * not part of the answer) */
static nvSandboxUtilsRet_t push(cursor_t *c, nvSandboxUtilsFileType_t type, nvSandboxUtilsFileSystemSubType_t subtype,
                                nvSandboxUtilsFileModule_t module, const char *rel)
{
    const char *sep = root[0] && root[strlen(root) - 1] == '/' ? "" : "/";
    struct stat st;
    node_t *n;
    int len;

    n = calloc(1, sizeof(*n));
    if (!n)
        return NVSANDBOXUTILS_ERROR_OUT_OF_MEMORY;
    len = snprintf(n->path, sizeof(n->path), "%s%s%s", root, sep, rel[0] == '/' ? rel + 1 : rel);
    if (len < 0 || (size_t)len >= sizeof(n->path) || lstat(n->path, &st) != 0) {
        free(n);
        return NVSANDBOXUTILS_SUCCESS;
    }
    n->info.fileType = type;
    n->info.fileSubType = subtype;
    n->info.module = module;
    n->info.flags = NV_FILE_FLAG_HINT;
    n->info.filePath = n->path;
    n->owned = owned;
    owned = n;
    *c->pos = &n->info;
    c->pos = &n->info.next;
    return NVSANDBOXUTILS_SUCCESS;
}

nvSandboxUtilsRet_t nvSandboxUtilsInit(nvSandboxUtilsInitInput_t *input)
{
    struct stat st;
    char value[INPUT_LENGTH];

    if (!input)
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;
    if (input->version != 1)
        return NVSANDBOXUTILS_ERROR_VERSION_NOT_SUPPORTED;
    switch (input->type) {
    case NV_ROOTFS_DEFAULT:
        snprintf(value, sizeof(value), "/");
        break;
    case NV_ROOTFS_PATH:
        if (!memchr(input->value, '\0', sizeof(input->value)) || input->value[0] != '/' ||
            stat(input->value, &st) != 0 || !S_ISDIR(st.st_mode))
            return NVSANDBOXUTILS_ERROR_INVALID_ARG;
        snprintf(value, sizeof(value), "%s", input->value);
        break;
    default: /* NV_ROOTFS_PID: the lab has no driver containers */
        return NVSANDBOXUTILS_ERROR_NOT_SUPPORTED;
    }
    if (nvmlInit_v2() != NVML_SUCCESS)
        return NVSANDBOXUTILS_ERROR_NVML_LIB_CALL;
    pthread_mutex_lock(&lock);
    memcpy(root, value, sizeof(root));
    refcount++;
    pthread_mutex_unlock(&lock);
    return NVSANDBOXUTILS_SUCCESS;
}

nvSandboxUtilsRet_t nvSandboxUtilsShutdown(void)
{
    pthread_mutex_lock(&lock);
    if (!refcount) {
        pthread_mutex_unlock(&lock);
        return NVSANDBOXUTILS_ERROR_UNINITIALIZED;
    }
    if (--refcount == 0)
        free_all();
    pthread_mutex_unlock(&lock);
    nvmlShutdown();
    return NVSANDBOXUTILS_SUCCESS;
}

nvSandboxUtilsRet_t nvSandboxUtilsGetDriverVersion(char *version, unsigned int length)
{
    nvmlReturn_t r;

    if (!refcount)
        return NVSANDBOXUTILS_ERROR_UNINITIALIZED;
    if (!version)
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;
    r = nvmlSystemGetDriverVersion(version, length);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE)
        return NVSANDBOXUTILS_ERROR_INSUFFICIENT_SIZE;
    return r == NVML_SUCCESS ? NVSANDBOXUTILS_SUCCESS : NVSANDBOXUTILS_ERROR_NVML_LIB_CALL;
}

/* the files of the node-wide driver devices, part of every GPU's answer */
static nvSandboxUtilsRet_t driver_files(cursor_t *c)
{
    static const struct {
        nvSandboxUtilsFileSystemSubType_t subtype;
        nvSandboxUtilsFileModule_t module;
        const char *path;
    } files[] = {
        {NV_DEV_NVIDIA_CTL, NV_DRIVER_NVIDIA, "/dev/nvidiactl"},
        {NV_DEV_NVIDIA_UVM, NV_DRIVER_NVIDIA_UVM, "/dev/nvidia-uvm"},
        {NV_DEV_NVIDIA_UVM_TOOLS, NV_DRIVER_NVIDIA_UVM, "/dev/nvidia-uvm-tools"},
        {NV_DEV_NVIDIA_MODESET, NV_DRIVER_NVIDIA_MODESET, "/dev/nvidia-modeset"},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        nvSandboxUtilsRet_t r = push(c, NV_DEV, files[i].subtype, files[i].module, files[i].path);
        if (r != NVSANDBOXUTILS_SUCCESS)
            return r;
    }
    return NVSANDBOXUTILS_SUCCESS;
}

static nvSandboxUtilsRet_t gpu_files(cursor_t *c, nvmlDevice_t gpu, unsigned *minor)
{
    char rel[MAX_FILE_PATH];
    nvmlPciInfo_t pci;
    nvSandboxUtilsRet_t r;

    if (nvmlDeviceGetMinorNumber(gpu, minor) != NVML_SUCCESS || nvmlDeviceGetPciInfo_v3(gpu, &pci) != NVML_SUCCESS)
        return NVSANDBOXUTILS_ERROR_NVML_LIB_CALL;
    snprintf(rel, sizeof(rel), "/dev/nvidia%u", *minor);
    r = push(c, NV_DEV, NV_DEV_NVIDIA, NV_GPU, rel);
    if (r != NVSANDBOXUTILS_SUCCESS)
        return r;
    /* procfs and sysfs entries of the GPU, as a driver has them: listed only
     * where they exist (never in a lab node) */
    snprintf(rel, sizeof(rel), "/proc/driver/nvidia/gpus/%04x:%02x:%02x.0", pci.domain & 0xFFFF, pci.bus,
             pci.device);
    r = push(c, NV_PROC, NV_PROC_DRIVER_NVIDIA_GPUS_PCIBUSID, NV_GPU, rel);
    if (r != NVSANDBOXUTILS_SUCCESS)
        return r;
    snprintf(rel, sizeof(rel), "/sys/module/nvidia/drivers/pci:nvidia/%04x:%02x:%02x.0", pci.domain & 0xFFFF,
             pci.bus, pci.device);
    return push(c, NV_SYS, NV_SYS_MODULE_NVIDIA_DRIVER_PCIBUSID, NV_GPU, rel);
}

nvSandboxUtilsRet_t nvSandboxUtilsGetGpuResource(nvSandboxUtilsGpuRes_t *request)
{
    nvSandboxUtilsGpuFileInfo_v1_t *first = NULL;
    cursor_t c = {&first};
    nvmlDevice_t dev, parent;
    unsigned minor, gi, ci, is_mig = 0;
    char rel[MAX_FILE_PATH];
    nvSandboxUtilsRet_t r;
    nvmlReturn_t nr;

    if (!refcount)
        return NVSANDBOXUTILS_ERROR_UNINITIALIZED;
    if (!request)
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;
    if (request->version != 1)
        return NVSANDBOXUTILS_ERROR_VERSION_NOT_SUPPORTED;
    if (!memchr(request->input, '\0', sizeof(request->input)))
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;
    switch (request->inputType) {
    case NV_GPU_INPUT_GPU_UUID:
    case NV_GPU_INPUT_MIG_UUID:
        nr = nvmlDeviceGetHandleByUUID(request->input, &dev);
        break;
    case NV_GPU_INPUT_PCI_ID:
        nr = nvmlDeviceGetHandleByPciBusId_v2(request->input, &dev);
        break;
    default:
        return NVSANDBOXUTILS_ERROR_NOT_SUPPORTED;
    }
    if (nr != NVML_SUCCESS)
        return NVSANDBOXUTILS_ERROR_INVALID_ARG; /* "doesn't match any device" */
    if (nvmlDeviceIsMigDeviceHandle(dev, &is_mig) != NVML_SUCCESS)
        return NVSANDBOXUTILS_ERROR_NVML_LIB_CALL;
    if ((request->inputType == NV_GPU_INPUT_MIG_UUID) != (is_mig != 0))
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;

    pthread_mutex_lock(&lock);
    if (!is_mig) {
        r = gpu_files(&c, dev, &minor);
    } else if (nvmlDeviceGetDeviceHandleFromMigDeviceHandle(dev, &parent) != NVML_SUCCESS ||
               nvmlDeviceGetGpuInstanceId(dev, &gi) != NVML_SUCCESS ||
               nvmlDeviceGetComputeInstanceId(dev, &ci) != NVML_SUCCESS ||
               nvmlDeviceGetMinorNumber(parent, &minor) != NVML_SUCCESS) {
        r = NVSANDBOXUTILS_ERROR_NVML_LIB_CALL;
    } else if (minor >= CAP_MAX_GPU) {
        r = NVSANDBOXUTILS_ERROR_NOT_SUPPORTED;
    } else {
        /* the parent GPU's node, then the GPU and compute instance capabilities */
        snprintf(rel, sizeof(rel), "/dev/nvidia%u", minor);
        r = push(&c, NV_DEV, NV_DEV_NVIDIA, NV_GPU, rel);
        if (r == NVSANDBOXUTILS_SUCCESS) {
            snprintf(rel, sizeof(rel), "/dev/nvidia-caps/nvidia-cap%d", cap_minor_gi(minor, gi));
            r = push(&c, NV_DEV, NV_DEV_NVIDIA_CAPS_NVIDIA_CAP, NV_MIG, rel);
        }
        if (r == NVSANDBOXUTILS_SUCCESS) {
            snprintf(rel, sizeof(rel), "/dev/nvidia-caps/nvidia-cap%d", cap_minor_ci(minor, gi, ci));
            r = push(&c, NV_DEV, NV_DEV_NVIDIA_CAPS_NVIDIA_CAP, NV_MIG, rel);
        }
        if (r == NVSANDBOXUTILS_SUCCESS) {
            snprintf(rel, sizeof(rel), "/proc/driver/nvidia/capabilities/gpu%u/mig/gi%u/ci%u/access", minor, gi, ci);
            r = push(&c, NV_PROC, NV_PROC_DRIVER_NVIDIA_CAPABILITIIES_GPU_MIG_CI_ACCESS, NV_MIG, rel);
        }
    }
    if (r == NVSANDBOXUTILS_SUCCESS)
        r = driver_files(&c);
    pthread_mutex_unlock(&lock);
    if (r != NVSANDBOXUTILS_SUCCESS)
        return r;
    request->files = first;
    return NVSANDBOXUTILS_SUCCESS;
}

nvSandboxUtilsRet_t nvSandboxUtilsGetFileContent(char *filePath, char *content, unsigned int *contentSize)
{
    char target[MAX_FILE_PATH];
    ssize_t n;
    FILE *f;

    if (!refcount)
        return NVSANDBOXUTILS_ERROR_UNINITIALIZED;
    if (!filePath || !content || !contentSize)
        return NVSANDBOXUTILS_ERROR_INVALID_ARG;
    /* a symlink's target (the by-path DRI links), else the file's text */
    n = readlink(filePath, target, sizeof(target) - 1);
    if (n < 0 && errno == EINVAL) {
        f = fopen(filePath, "r");
        if (!f)
            return NVSANDBOXUTILS_ERROR_FILEPATH_NOT_FOUND;
        n = (ssize_t)fread(target, 1, sizeof(target) - 1, f);
        fclose(f);
    }
    if (n < 0)
        return NVSANDBOXUTILS_ERROR_FILEPATH_NOT_FOUND;
    target[n] = '\0';
    if ((size_t)n + 1 > *contentSize) {
        *contentSize = (unsigned)n + 1;
        return NVSANDBOXUTILS_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(content, target, (size_t)n + 1);
    *contentSize = (unsigned)n + 1;
    return NVSANDBOXUTILS_SUCCESS;
}
