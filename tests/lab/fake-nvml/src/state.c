/*
 * MIG state shared by every process that uses the same state file.
 *
 * Text format, one record per line:
 *   gpu <uuid> <current mig mode> <pending mig mode>
 *   gi  <uuid> <gi id> <profile id> <placement start> <placement size>
 *   ci  <uuid> <gi id> <ci id> <ci profile id> <placement start> <placement size>
 *   persist <uuid> <0|1>            persistence mode set through nvmlDeviceSetPersistenceMode
 *   created <uuid> <n>              GPU instances created since boot
 *   busy <uuid> <gi> <ci> <pid> <compute|graphics|client> <used MiB> <name>
 *                                   a process or client holding the GPU (gi/ci -1: the GPU)
 *   xid <uuid> <xid>                an XID the lab injected since the GPU's last reset (in order)
 *
 * Readers take a shared flock on "<state>.lock", writers an exclusive one and
 * replace the file atomically (write to a temporary file, then rename).
 */
#include "fake.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static void mkdirs(const char *path)
{
    char tmp[1024];
    char *slash;
    snprintf(tmp, sizeof(tmp), "%s", path);
    slash = strrchr(tmp, '/');
    if (!slash || slash == tmp)
        return;
    *slash = '\0';
    for (char *s = tmp + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(tmp, 0755);
            *s = '/';
        }
    }
    mkdir(tmp, 0755);
}

static fake_gpu_state_t *find_uuid(fake_state_t *st, const char *uuid, int create)
{
    for (unsigned i = 0; i < st->n; i++)
        if (!strcmp(st->g[i].uuid, uuid))
            return &st->g[i];
    if (!create || st->n >= FAKE_STATE_MAX)
        return NULL;
    memset(&st->g[st->n], 0, sizeof(st->g[0]));
    snprintf(st->g[st->n].uuid, sizeof(st->g[0].uuid), "%s", uuid);
    st->g[st->n].mig_cur = st->g[st->n].mig_pend = -1; /* unset: profile default */
    st->g[st->n].persistence = -1;
    return &st->g[st->n++];
}

static void parse_state(fake_state_t *st, FILE *f)
{
    char line[512], uuid[FAKE_UUID_LEN];
    while (fgets(line, sizeof(line), f)) {
        unsigned a, b, c, d, e;
        int m1, m2;
        fake_gpu_state_t *g;
        char kind[16], name[64];
        unsigned long long mib;
        if (sscanf(line, "xid %95s %u", uuid, &a) == 2) {
            g = find_uuid(st, uuid, 1);
            if (g && g->nxid < FAKE_MAX_XIDS)
                g->xid[g->nxid++] = a;
        } else if (sscanf(line, "persist %95s %d", uuid, &m1) == 2) {
            g = find_uuid(st, uuid, 1);
            if (g)
                g->persistence = m1 ? 1 : 0;
        } else if (sscanf(line, "created %95s %u", uuid, &a) == 2) {
            g = find_uuid(st, uuid, 1);
            if (g)
                g->created = a;
        } else if (sscanf(line, "busy %95s %d %d %u %15s %llu %63s", uuid, &m1, &m2, &a, kind, &mib, name) == 7) {
            g = find_uuid(st, uuid, 1);
            for (unsigned k = 0; g && k < FAKE_MAX_BUSY; k++)
                if (!g->busy[k].used) {
                    fake_busy_rec_t *b = &g->busy[k];
                    b->used = 1;
                    b->gi = m1;
                    b->ci = m2;
                    b->pid = a;
                    b->kind = !strcmp(kind, "graphics") ? BUSY_GRAPHICS
                              : !strcmp(kind, "client") ? BUSY_CLIENT : BUSY_COMPUTE;
                    b->used_mib = mib;
                    snprintf(b->name, sizeof(b->name), "%s", name);
                    break;
                }
        } else if (sscanf(line, "gpu %95s %d %d", uuid, &m1, &m2) == 3) {
            g = find_uuid(st, uuid, 1);
            if (g) {
                g->mig_cur = m1 ? 1 : 0;
                g->mig_pend = m2 ? 1 : 0;
            }
        } else if (sscanf(line, "gi %95s %u %u %u %u", uuid, &a, &b, &c, &d) == 5) {
            g = find_uuid(st, uuid, 1);
            if (g && a < FAKE_MAX_GI) {
                g->gi[a].used = 1;
                g->gi[a].profile_id = b;
                g->gi[a].start = c;
                g->gi[a].size = d;
            }
        } else if (sscanf(line, "ci %95s %u %u %u %u %u", uuid, &a, &b, &c, &d, &e) == 6) {
            g = find_uuid(st, uuid, 1);
            if (g && a < FAKE_MAX_GI && b < FAKE_MAX_CI && g->gi[a].used) {
                g->gi[a].ci[b].used = 1;
                g->gi[a].ci[b].profile_id = c;
                g->gi[a].ci[b].start = d;
                g->gi[a].ci[b].size = e;
            }
        }
    }
}

nvmlReturn_t fake_state_open(fake_state_t *st, const char *path, int exclusive)
{
    char lockpath[1100];
    FILE *f;

    st->n = 0;
    st->writable = 0;
    st->lockfd = -1;
    snprintf(st->path, sizeof(st->path), "%s", path);
    snprintf(lockpath, sizeof(lockpath), "%s.lock", path);
    mkdirs(path);
    st->lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (st->lockfd < 0) {
        if (exclusive)
            return NVML_ERROR_NO_PERMISSION;
    } else {
        while (flock(st->lockfd, exclusive ? LOCK_EX : LOCK_SH) != 0) {
            if (errno != EINTR) {
                close(st->lockfd);
                st->lockfd = -1;
                return NVML_ERROR_UNKNOWN;
            }
        }
        st->writable = exclusive;
    }
    f = fopen(path, "r");
    if (f) {
        parse_state(st, f);
        fclose(f);
    }
    return NVML_SUCCESS;
}

nvmlReturn_t fake_state_commit(fake_state_t *st)
{
    char tmp[1100];
    FILE *f;
    int ok = 1;

    if (!st->writable)
        return NVML_ERROR_NO_PERMISSION;
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", st->path, (long)getpid());
    f = fopen(tmp, "w");
    if (!f)
        return NVML_ERROR_NO_PERMISSION;
    fprintf(f, "# gpuops fake NVML MIG state (shared by all processes using this file)\n");
    for (unsigned i = 0; i < st->n; i++) {
        const fake_gpu_state_t *g = &st->g[i];
        static const char *const kinds[] = {"compute", "graphics", "client"};
        if (g->mig_cur >= 0)
            fprintf(f, "gpu %s %d %d\n", g->uuid, g->mig_cur, g->mig_pend);
        if (g->persistence >= 0)
            fprintf(f, "persist %s %d\n", g->uuid, g->persistence);
        if (g->created)
            fprintf(f, "created %s %u\n", g->uuid, g->created);
        for (unsigned k = 0; k < g->nxid; k++)
            fprintf(f, "xid %s %u\n", g->uuid, g->xid[k]);
        for (unsigned k = 0; k < FAKE_MAX_BUSY; k++)
            if (g->busy[k].used)
                fprintf(f, "busy %s %d %d %u %s %llu %s\n", g->uuid, g->busy[k].gi, g->busy[k].ci, g->busy[k].pid,
                        kinds[g->busy[k].kind], g->busy[k].used_mib, g->busy[k].name);
        for (unsigned a = 0; a < FAKE_MAX_GI; a++) {
            if (!g->gi[a].used)
                continue;
            fprintf(f, "gi %s %u %u %u %u\n", g->uuid, a, g->gi[a].profile_id, g->gi[a].start,
                    g->gi[a].size);
            for (unsigned b = 0; b < FAKE_MAX_CI; b++)
                if (g->gi[a].ci[b].used)
                    fprintf(f, "ci %s %u %u %u %u %u\n", g->uuid, a, b, g->gi[a].ci[b].profile_id,
                            g->gi[a].ci[b].start, g->gi[a].ci[b].size);
        }
    }
    if (fflush(f) != 0)
        ok = 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok || rename(tmp, st->path) != 0) {
        unlink(tmp);
        return NVML_ERROR_NO_PERMISSION;
    }
    return NVML_SUCCESS;
}

void fake_state_close(fake_state_t *st)
{
    if (st->lockfd >= 0) {
        flock(st->lockfd, LOCK_UN);
        close(st->lockfd);
    }
    st->lockfd = -1;
    st->writable = 0;
}

fake_gpu_state_t *fake_state_gpu(fake_state_t *st, const fake_gpu_t *g)
{
    fake_gpu_state_t *s = find_uuid(st, g->uuid, 1);
    if (s && s->mig_cur < 0) {
        s->mig_cur = s->mig_pend = g->mig_mode_default ? 1 : 0;
    }
    return s;
}
