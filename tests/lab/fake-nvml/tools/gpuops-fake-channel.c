/*
 * gpuops-fake-channel: answers one connection to the simulated driver's socket (systemd passes it
 * as standard input: gpuops-fake-driver-channel.socket, Accept=yes) with a descriptor of this
 * node's root directory, so that the fake NVML in a container reads the node's profile and state
 * (see src/channel.c).
 *
 *   gpuops-fake-channel [ROOT]    ROOT: the directory handed over (default /; the tests use others)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char byte = 'R', ctrl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr msg;
    struct cmsghdr *c;
    const char *dir = argc > 1 ? argv[1] : "/";
    int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);

    if (root < 0) {
        fprintf(stderr, "gpuops-fake-channel: %s: %m\n", dir);
        return 1;
    }
    memset(&msg, 0, sizeof(msg));
    memset(ctrl, 0, sizeof(ctrl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof(ctrl);
    c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &root, sizeof(int));
    if (sendmsg(0, &msg, MSG_NOSIGNAL) != 1) {
        perror("gpuops-fake-channel: sendmsg");
        return 1;
    }
    return 0;
}
