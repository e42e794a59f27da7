/*
 * nvidia-smi of the lab's simulated driver: a small stand-in, not NVIDIA's
 * program, that answers from NVML (the fake libnvidia-ml.so.1) the way the
 * real one does for the few forms the lab needs:
 *
 *     nvidia-smi            the driver and CUDA versions and one line per GPU
 *     nvidia-smi -L         "GPU i: NAME (UUID: GPU-...)", MIG devices below
 *     nvidia-smi --version  the versions of nvidia-smi, NVML, the driver, CUDA
 *     nvidia-smi -r [-i ID[,ID...]]
 *                           GPU reset (ID: index, PCI bus id or UUID; all GPUs without -i),
 *                           through the fake's gpuopsFakeNvmlResetGpu: fails while a process or
 *                           client holds the GPU, with nvidia-smi's wording
 *
 * A driver installation puts nvidia-smi on the node, and the container
 * toolkit relies on it: nvidia-cdi-refresh.service only runs when
 * /usr/bin/nvidia-smi exists, and nvidia-ctk mounts it into containers.
 *
 * Exit status, as nvidia-smi(1) RETURN VALUE documents: 0 on success, 2 for
 * invalid arguments, 9 when the driver is not loaded, otherwise NVML's return
 * code (18 for a library/kernel module version mismatch).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvml.h>

static int usage(FILE *out)
{
    fprintf(out, "nvidia-smi (gpuops lab placeholder)\n\n"
                 "    nvidia-smi            driver version and one line per GPU\n"
                 "    nvidia-smi -L         list the GPUs and MIG devices\n"
                 "    nvidia-smi --version  versions of nvidia-smi, NVML, the driver and CUDA\n"
                 "    nvidia-smi -r [-i ID[,ID...]]  reset GPUs (index, PCI bus id or UUID)\n");
    return out == stdout ? 0 : 2;
}

/* nvidia-smi's own wording for the failures the lab simulates */
static int init_failed(nvmlReturn_t r)
{
    char version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE] = "";

    switch (r) {
    case NVML_ERROR_DRIVER_NOT_LOADED:
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n\n");
        break;
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        printf("Failed to initialize NVML: Driver/library version mismatch\n");
        if (nvmlSystemGetNVMLVersion(version, sizeof(version)) == NVML_SUCCESS)
            printf("NVML library version: %s\n", version);
        break;
    default:
        printf("Failed to initialize NVML: %s\n", nvmlErrorString(r));
    }
    return (int)r;
}

static void cuda_text(char *out, size_t len)
{
    int cuda = 0;
    if (nvmlSystemGetCudaDriverVersion_v2(&cuda) == NVML_SUCCESS)
        snprintf(out, len, "%d.%d", cuda / 1000, cuda % 1000 / 10);
    else
        snprintf(out, len, "N/A");
}

static int version(void)
{
    char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], nvml[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE], cuda[16];

    if (nvmlSystemGetDriverVersion(drv, sizeof(drv)) != NVML_SUCCESS ||
        nvmlSystemGetNVMLVersion(nvml, sizeof(nvml)) != NVML_SUCCESS)
        return 255;
    cuda_text(cuda, sizeof(cuda));
    printf("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\nCUDA Version        : %s\n",
           drv, nvml, drv, cuda);
    return 0;
}

/* MIG devices of one GPU, as `nvidia-smi -L` prints them; the profile name is
 * what NVML's device name says after "MIG " */
static void list_mig(nvmlDevice_t gpu)
{
    unsigned current = 0, pending = 0, max = 0;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

    if (nvmlDeviceGetMigMode(gpu, &current, &pending) != NVML_SUCCESS || current != NVML_DEVICE_MIG_ENABLE ||
        nvmlDeviceGetMaxMigDeviceCount(gpu, &max) != NVML_SUCCESS)
        return;
    for (unsigned j = 0; j < max; j++) {
        nvmlDevice_t mig;
        const char *profile;
        if (nvmlDeviceGetMigDeviceHandleByIndex(gpu, j, &mig) != NVML_SUCCESS)
            continue;
        if (nvmlDeviceGetName(mig, name, sizeof(name)) != NVML_SUCCESS ||
            nvmlDeviceGetUUID(mig, uuid, sizeof(uuid)) != NVML_SUCCESS)
            continue;
        profile = strstr(name, "MIG ");
        printf("  MIG %-15s Device %2u: (UUID: %s)\n", profile ? profile + 4 : name, j, uuid);
    }
}

static int list(void)
{
    unsigned count = 0;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

    if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
        return 255;
    if (!count) {
        printf("No devices were found\n");
        return 6;
    }
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t gpu;
        nvmlReturn_t r = nvmlDeviceGetHandleByIndex_v2(i, &gpu);
        if (r == NVML_SUCCESS)
            r = nvmlDeviceGetName(gpu, name, sizeof(name));
        if (r == NVML_SUCCESS)
            r = nvmlDeviceGetUUID(gpu, uuid, sizeof(uuid));
        if (r != NVML_SUCCESS) {
            printf("Unable to determine the device handle for GPU%u: %s\n", i, nvmlErrorString(r));
            continue;
        }
        printf("GPU %u: %s (UUID: %s)\n", i, name, uuid);
        list_mig(gpu);
    }
    return 0;
}

static int summary(void)
{
    char drv[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE], cuda[16], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned count = 0;
    int rc = 0;

    if (nvmlSystemGetDriverVersion(drv, sizeof(drv)) != NVML_SUCCESS || nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
        return 255;
    cuda_text(cuda, sizeof(cuda));
    printf("NVIDIA-SMI %s    Driver Version: %s    CUDA Version: %s    (gpuops lab placeholder)\n", drv, drv,
           cuda);
    printf("GPU  Name                              Bus-Id            MIG M.\n");
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t gpu;
        nvmlPciInfo_t pci;
        unsigned current = 0, pending = 0;
        const char *mig = "N/A";
        nvmlReturn_t r = nvmlDeviceGetHandleByIndex_v2(i, &gpu);
        if (r == NVML_SUCCESS)
            r = nvmlDeviceGetName(gpu, name, sizeof(name));
        if (r == NVML_SUCCESS)
            r = nvmlDeviceGetPciInfo_v3(gpu, &pci);
        if (r != NVML_SUCCESS) {
            printf("%3u  ERR! (%s)\n", i, nvmlErrorString(r));
            rc = (int)r;
            continue;
        }
        if (nvmlDeviceGetMigMode(gpu, &current, &pending) == NVML_SUCCESS)
            mig = current == NVML_DEVICE_MIG_ENABLE ? "Enabled" : "Disabled";
        printf("%3u  %-32s  %-16s  %s\n", i, name, pci.busId, mig);
    }
    return rc;
}

int gpuopsFakeNvmlResetGpu(const char *uuid); /* the fake NVML's test hook */

static nvmlReturn_t handle_of(const char *id, nvmlDevice_t *dev)
{
    char *end;
    unsigned long i = strtoul(id, &end, 10);
    if (*id && !*end)
        return nvmlDeviceGetHandleByIndex_v2((unsigned)i, dev);
    if (!strncmp(id, "GPU-", 4))
        return nvmlDeviceGetHandleByUUID(id, dev);
    return nvmlDeviceGetHandleByPciBusId_v2(id, dev);
}

static int reset(const char *ids)
{
    char buf[1024], *save = NULL, failed[4096] = "";
    unsigned nfailed = 0, count = 0;
    nvmlDevice_t devs[64];
    unsigned ndev = 0;
    if (ids) {
        snprintf(buf, sizeof(buf), "%s", ids);
        for (char *id = strtok_r(buf, ",", &save); id && ndev < 64; id = strtok_r(NULL, ",", &save)) {
            if (handle_of(id, &devs[ndev]) != NVML_SUCCESS) {
                printf("No devices were found matching the identifier \"%s\".\n", id);
                return 6;
            }
            ndev++;
        }
    } else {
        if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
            return 255;
        for (unsigned i = 0; i < count && ndev < 64; i++)
            if (nvmlDeviceGetHandleByIndex_v2(i, &devs[ndev]) == NVML_SUCCESS)
                ndev++;
    }
    for (unsigned k = 0; k < ndev; k++) {
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        nvmlPciInfo_t pci;
        int r;
        if (nvmlDeviceGetUUID(devs[k], uuid, sizeof(uuid)) != NVML_SUCCESS ||
            nvmlDeviceGetPciInfo_v3(devs[k], &pci) != NVML_SUCCESS)
            return 255;
        r = gpuopsFakeNvmlResetGpu(uuid);
        if (r == NVML_SUCCESS) {
            printf("GPU %s was successfully reset.\n", pci.busId);
        } else {
            size_t l = strlen(failed);
            snprintf(failed + l, sizeof(failed) - l, "\tGPU %s: %s\n", pci.busId, nvmlErrorString((nvmlReturn_t)r));
            nfailed++;
        }
    }
    if (nfailed) {
        printf("The following GPUs could not be reset:\n%s\n%u device%s currently being used by one or more other "
               "processes (e.g., Fabric Manager, CUDA application, graphics application such as an X server, or a "
               "monitoring application such as another instance of nvidia-smi). Please first kill all processes "
               "using %s device%s and all compute applications running in the system.\n",
               failed, nfailed, nfailed == 1 ? " is" : "s are", nfailed == 1 ? "this" : "these", nfailed == 1 ? "" : "s");
        return 255;
    }
    printf("All done.\n");
    return 0;
}

int main(int argc, char **argv)
{
    nvmlReturn_t r;
    int rc;

    if (argc >= 2 && (!strcmp(argv[1], "-r") || !strcmp(argv[1], "--gpu-reset"))) {
        const char *ids = NULL;
        if (argc == 4 && (!strcmp(argv[2], "-i") || !strcmp(argv[2], "--id")))
            ids = argv[3];
        else if (argc == 3 && !strncmp(argv[2], "--id=", 5))
            ids = argv[2] + 5;
        else if (argc != 2)
            return usage(stderr);
        r = nvmlInit_v2();
        if (r != NVML_SUCCESS)
            return init_failed(r);
        rc = reset(ids);
        nvmlShutdown();
        return rc;
    }
    if (argc > 2)
        return usage(stderr);
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))
        return usage(stdout);
    if (argc == 2 && strcmp(argv[1], "-L") && strcmp(argv[1], "--list-gpus") && strcmp(argv[1], "--version")) {
        fprintf(stderr, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n");
        return 2;
    }
    r = nvmlInit_v2();
    if (r != NVML_SUCCESS)
        return init_failed(r);
    if (argc == 1)
        rc = summary();
    else if (!strcmp(argv[1], "--version"))
        rc = version();
    else
        rc = list();
    nvmlShutdown();
    return rc;
}
