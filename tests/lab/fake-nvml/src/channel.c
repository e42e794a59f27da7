/*
 * The simulated driver's channel into containers.
 *
 * A real NVML in a container reaches the host's kernel driver through the device nodes the NVIDIA
 * Container Toolkit injects (/dev/nvidiactl, /dev/nvidia0, ...): the driver's state is the
 * node's, not the container's. The fake's "kernel" is the node's profile and state files, which a
 * container does not have. So the fake uses the one driver-owned rendezvous the toolkit carries
 * into every GPU container: nvidia-ctk's CDI generation mounts /run/nvidia-persistenced/socket
 * when it exists (NVIDIA Container Toolkit, internal/discover/ipc.go: "/nvidia-persistenced/socket"
 * under /run and /var/run). In a lab node that socket is gpuops-fake-driver-channel.socket (the
 * lab has no nvidia-persistenced), and each connection is answered with a file descriptor of the
 * node's root directory (SCM_RIGHTS). The library then reads the node's files through
 * /proc/self/fd/N/..., so a container sees the node's GPUs, MIG state and driver state, as it
 * would see a real node's through its kernel driver.
 *
 * A container may also see the node's driver under a directory of its own, as NVIDIA's DRA
 * driver and other operands mount the host's driver root (their NVIDIA_DRIVER_ROOT, /driver-root
 * in the container) and load libnvidia-ml.so.1 from there: NVML loaded from a driver root talks
 * to that root's driver, so the socket is looked for under the root the library itself was
 * loaded from (its directory minus the library directory, e.g. /driver-root for
 * /driver-root/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1) too.
 *
 * Used only when no profile is given by the environment and none is at the default path.
 */
#define _GNU_SOURCE /* dladdr */
#include "fake.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

static int channel_fd = -1;

static int receive_root(const char *path)
{
    struct sockaddr_un addr;
    struct timeval tv = {2, 0};
    char byte, ctrl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg;
    struct cmsghdr *c;
    int s, fd = -1;

    if (strlen(path) >= sizeof(addr.sun_path))
        return -1;
    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    memset(&addr, 0, sizeof(addr));
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, path);
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(s, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl;
        msg.msg_controllen = sizeof(ctrl);
        if (recvmsg(s, &msg, MSG_CMSG_CLOEXEC) > 0) {
            c = CMSG_FIRSTHDR(&msg);
            if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
                c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(&fd, CMSG_DATA(c), sizeof(int));
        }
    }
    close(s);
    return fd;
}

static int still_a_directory(int fd)
{
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The driver root this library was loaded from ("" for /): its directory without the library
 * directory a driver installation puts it in. */
static void library_root(char *out, size_t len)
{
    static const char *const libdirs[] = {"/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
                                          "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
                                          "/usr/lib64", "/lib64", "/usr/lib", "/lib"};
    Dl_info info;
    char dir[512];
    char *slash;
    out[0] = '\0';
    if (!dladdr((void *)library_root, &info) || !info.dli_fname || info.dli_fname[0] != '/')
        return;
    snprintf(dir, sizeof(dir), "%s", info.dli_fname);
    slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = '\0';
    for (unsigned k = 0; k < sizeof(libdirs) / sizeof(libdirs[0]); k++) {
        size_t dl = strlen(dir), ll = strlen(libdirs[k]);
        if (dl > ll && !strcmp(dir + dl - ll, libdirs[k])) {
            snprintf(out, len, "%.*s", (int)(dl - ll), dir);
            return;
        }
    }
}

void fake_channel_root(char *out, size_t len)
{
    static const char *const sockets[] = {"/run/nvidia-persistenced/socket",
                                          "/var/run/nvidia-persistenced/socket"};
    char root[512], path[600];
    out[0] = '\0';
    /* the process may have closed or reused the descriptor since (daemons close their fds) */
    if (!still_a_directory(channel_fd))
        channel_fd = -1;
    for (unsigned k = 0; channel_fd < 0 && k < sizeof(sockets) / sizeof(sockets[0]); k++)
        channel_fd = receive_root(sockets[k]);
    if (channel_fd < 0) {
        library_root(root, sizeof(root));
        for (unsigned k = 0; root[0] && channel_fd < 0 && k < sizeof(sockets) / sizeof(sockets[0]); k++) {
            snprintf(path, sizeof(path), "%s%s", root, sockets[k]);
            channel_fd = receive_root(path);
        }
    }
    if (channel_fd >= 0)
        snprintf(out, len, "/proc/self/fd/%d", channel_fd);
}
