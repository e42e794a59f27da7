/*
 * MIG GPU instance profile tables, keyed by a profile's "mig_table" value.
 *
 * Profile INDEX (NVML_GPU_INSTANCE_PROFILE_*) selects the row for
 * nvmlDeviceGetGpuInstanceProfileInfo*; the profile ID (19, 20, 15, 14, 9, 5,
 * 0) is what create/list/capacity calls take. Placements are start:size in
 * units of the 8 memory slices; a GPU has 7 compute slices.
 */
#include "fake.h"

#include <string.h>

#define P_1G 7, {0, 1, 2, 3, 4, 5, 6}
#define P_1G2 4, {0, 2, 4, 6}
#define P_2G 3, {0, 2, 4}
#define P_3G 2, {0, 4}
#define P_4G 1, {0}
#define P_7G 1, {0}

/* index, id, name, slices, mem_slices, count, sm, ce, dec, enc, jpeg, ofa, mem_mb, placements */
static const fake_gi_profile_t a100_40gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 4864ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 4864ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.10gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, 9856ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 9856ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 19968ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 19968ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 40192ULL, P_7G},
};

static const fake_gi_profile_t a100_80gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 14, 1, 0, 0, 0, 0, 9728ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 14, 1, 1, 0, 1, 1, 9728ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 14, 1, 1, 0, 0, 0, 19968ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 28, 2, 1, 0, 0, 0, 19968ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 42, 3, 2, 0, 0, 0, 40192ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 56, 4, 2, 0, 0, 0, 40192ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 98, 7, 5, 0, 1, 1, 80896ULL, P_7G},
};

static const fake_gi_profile_t h100_80gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.10gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 9984ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.10gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 9984ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.20gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 20096ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.20gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 20096ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.40gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 40448ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.40gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 40448ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.80gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, 81152ULL, P_7G},
};

/* H200 141GB: `nvidia-smi mig -lgip` on a real HGX H200 (NVIDIA/mig-parted #120): memory
 * 16.00 / 16.00 / 32.25 / 32.25 / 69.50 / 69.50 / 139.75 GiB; SMs, copy engines, decoders, JPEG
 * and OFA as NVIDIA's MIG user guide lists them (no encoders on H200). The placements are
 * H100's (same profile IDs and geometry). */
static const fake_gi_profile_t h200_141gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.18gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 16384ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.18gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 16384ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.35gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 33024ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.35gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 33024ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.71gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 71168ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.71gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 71168ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.141gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, 143104ULL, P_7G},
};

/* B200: 1g.23gb, 1g.23gb+me, 1g.45gb and 2g.45gb as a real B200 reports them (NVIDIA/mig-parted
 * #166: 22.00 / 22.00 / 44.25 / 44.25 GiB, 18 / 18 / 30 / 36 SMs, 2 copy engines on 1g, 4 on 2g,
 * 2 decoders and JPEG on 2g); the 3g, 4g and 7g rows are NOT measured (no published output
 * was found): their SMs, engines and memory are extrapolated from the 2g row. */
static const fake_gi_profile_t b200_180gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.23gb", 1, 1, 7, 18, 2, 1, 0, 1, 0, 22528ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.23gb+me", 1, 1, 1, 18, 2, 1, 0, 1, 1, 22528ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.45gb", 1, 2, 4, 30, 2, 1, 0, 1, 0, 45312ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.45gb", 2, 2, 3, 36, 4, 2, 0, 2, 0, 45312ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.90gb", 3, 4, 2, 54, 6, 3, 0, 3, 0, 90624ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.90gb", 4, 4, 1, 72, 8, 4, 0, 4, 0, 90624ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.180gb", 7, 8, 1, 148, 16, 7, 0, 7, 1, 181248ULL, P_7G},
};

/* RTX PRO 6000 Blackwell (96 GB): other profile IDs than A100/H100 (1g.24gb is 14, 2g.48gb 5,
 * 4g.96gb 0) and the +me, +gfx, +me.all and -me variants; 4 compute slices, placements on a grid
 * of 12 (1g {0,3,6,9}:3, 2g {0,6}:6, 4g {0}:12). Figures from published `nvidia-smi mig -lgip`
 * and `-lgipp` output of driver 580/610 (23.62 / 47.38 / 95.00 GiB) and NVIDIA's MIG user
 * guide (engines, counts). */
#define R_1G 4, {0, 3, 6, 9}
#define R_2G 2, {0, 6}
#define R_4G 1, {0}
static const fake_gi_profile_t rtx_pro_6000[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 14, "1g.24gb", 1, 3, 4, 46, 1, 1, 1, 1, 0, 24186ULL, R_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 21, "1g.24gb+me", 1, 3, 1, 46, 1, 1, 1, 1, 1, 24186ULL, R_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX, 47, "1g.24gb+gfx", 1, 3, 4, 46, 1, 1, 1, 1, 0, 24186ULL, R_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, 65, "1g.24gb+me.all", 1, 3, 1, 46, 1, 4, 4, 4, 1, 24186ULL, R_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 67, "1g.24gb-me", 1, 3, 4, 46, 1, 0, 0, 0, 0, 24186ULL, R_1G},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 5, "2g.48gb", 2, 6, 2, 94, 2, 2, 2, 2, 0, 48517ULL, R_2G},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX, 35, "2g.48gb+gfx", 2, 6, 2, 94, 2, 2, 2, 2, 0, 48517ULL, R_2G},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME, 64, "2g.48gb+me.all", 2, 6, 1, 94, 2, 4, 4, 4, 1, 48517ULL, R_2G},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME, 66, "2g.48gb-me", 2, 6, 2, 94, 2, 0, 0, 0, 0, 48517ULL, R_2G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 0, "4g.96gb", 4, 12, 1, 188, 4, 4, 4, 4, 1, 97280ULL, R_4G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX, 32, "4g.96gb+gfx", 4, 12, 1, 188, 4, 4, 4, 4, 1, 97280ULL, R_4G},
};

#define TABLE(key, arr) {key, 7, sizeof(arr) / sizeof(arr[0]), arr, 7, 8}
static const fake_mig_table_t tables[] = {
    TABLE("a100-40gb", a100_40gb),   TABLE("a100-80gb", a100_80gb),
    TABLE("h100-80gb", h100_80gb),   TABLE("h200-141gb", h200_141gb),
    TABLE("b200-180gb", b200_180gb),
    {"rtx-pro-6000", 4, sizeof(rtx_pro_6000) / sizeof(rtx_pro_6000[0]), rtx_pro_6000, 4, 12},
};

const fake_mig_table_t *fake_mig_table_find(const char *key)
{
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
        if (strcmp(tables[i].key, key) == 0)
            return &tables[i];
    return NULL;
}

const char *fake_mig_table_keys(void)
{
    return "none, a100-40gb, a100-80gb, h100-80gb, h200-141gb, b200-180gb, rtx-pro-6000";
}

const fake_gi_profile_t *fake_mig_by_index(const fake_mig_table_t *t, unsigned index)
{
    for (unsigned i = 0; t && i < t->nprofiles; i++)
        if (t->profiles[i].index == index)
            return &t->profiles[i];
    return NULL;
}

const fake_gi_profile_t *fake_mig_by_id(const fake_mig_table_t *t, unsigned id)
{
    for (unsigned i = 0; t && i < t->nprofiles; i++)
        if (t->profiles[i].id == id)
            return &t->profiles[i];
    return NULL;
}

/* GPU instance ids that follow the placement tree (scheme "placement"): on 8 memory slices
 * 0 = 0:8, 1..2 = x:4, 3..6 = x:2, 7..14 = x:1 (the first 1g instance at 6:1 is id 13); on 4,
 * 0 = 0:4, 1..2 = x:2, 3..6 = x:1. */
unsigned fake_mig_gi_id(unsigned start, unsigned size, unsigned mem_slices)
{
    return (mem_slices / size - 1) + start / size;
}

int fake_ci_profile(const fake_gi_profile_t *gi, unsigned index, fake_ci_profile_t *out)
{
    static const unsigned slices_by_index[] = {1, 2, 3, 4, 7};
    unsigned n = gi->slices, s, step;

    if (index >= sizeof(slices_by_index) / sizeof(slices_by_index[0]))
        return -1;
    s = slices_by_index[index];
    if (s > n)
        return -1;
    /* 3-slice CIs exist in 3- and 7-slice GPU instances, 4-slice in 4 and 7 */
    if (s == 3 && n != 3 && n != 7)
        return -1;
    if (s == 4 && n != 4 && n != 7)
        return -1;
    if (s == 7 && n != 7)
        return -1;
    memset(out, 0, sizeof(*out));
    out->index = index;
    out->slices = s;
    step = (s == 3) ? 4 : s;
    for (unsigned st = 0; st + s <= n && out->nstarts < 8; st += step)
        out->starts[out->nstarts++] = st;
    out->count = out->nstarts;
    return 0;
}
