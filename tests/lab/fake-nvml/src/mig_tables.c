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

static const fake_gi_profile_t h200_141gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.18gb", 1, 1, 7, 16, 1, 1, 0, 1, 0, 17152ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.18gb+me", 1, 1, 1, 16, 1, 1, 0, 1, 1, 17152ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.35gb", 1, 2, 4, 26, 1, 1, 0, 1, 0, 33536ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.35gb", 2, 2, 3, 32, 2, 2, 0, 2, 0, 33536ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.71gb", 3, 4, 2, 60, 3, 3, 0, 3, 0, 67584ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.71gb", 4, 4, 1, 64, 4, 4, 0, 4, 0, 67584ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.141gb", 7, 8, 1, 132, 8, 7, 0, 7, 1, 135168ULL, P_7G},
};

/* Blackwell: simplified (same slot geometry as Hopper; SM/memory figures approximate) */
static const fake_gi_profile_t b200_180gb[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.23gb", 1, 1, 7, 18, 1, 1, 0, 1, 0, 22016ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.23gb+me", 1, 1, 1, 18, 1, 1, 0, 1, 1, 22016ULL, P_1G},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, "1g.45gb", 1, 2, 4, 18, 1, 1, 0, 1, 0, 43264ULL, P_1G2},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.45gb", 2, 2, 3, 36, 2, 2, 0, 2, 0, 43264ULL, P_2G},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.90gb", 3, 4, 2, 54, 3, 3, 0, 3, 0, 86272ULL, P_3G},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.90gb", 4, 4, 1, 72, 4, 4, 0, 4, 0, 86272ULL, P_4G},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.180gb", 7, 8, 1, 148, 8, 7, 0, 7, 1, 172544ULL, P_7G},
};

#define TABLE(key, arr) {key, 7, sizeof(arr) / sizeof(arr[0]), arr}
static const fake_mig_table_t tables[] = {
    TABLE("a100-40gb", a100_40gb),   TABLE("a100-80gb", a100_80gb),
    TABLE("h100-80gb", h100_80gb),   TABLE("h200-141gb", h200_141gb),
    TABLE("b200-180gb", b200_180gb),
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
    return "none, a100-40gb, a100-80gb, h100-80gb, h200-141gb, b200-180gb";
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

/* GPU instance ids follow the placement tree: 0 = 0:8, 1..2 = x:4,
 * 3..6 = x:2, 7..14 = x:1 (e.g. the first 1g instance at 6:1 is id 13). */
unsigned fake_mig_gi_id(unsigned start, unsigned size)
{
    return (8 / size - 1) + start / size;
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
