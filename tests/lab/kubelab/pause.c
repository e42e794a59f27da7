/* The lab's pod sandbox ("pause") process, written for the lab: it holds the pod's namespaces,
 * reaps the children it adopts and exits on SIGINT/SIGTERM, which is all a sandbox container
 * does. Linked statically; the lab's pause image holds only this file. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(int argc, char **argv)
{
    struct sigaction term = {0}, child = {0};
    if (argc > 1 && argv[1][0] == '-' && argv[1][1] == 'v') {
        static const char msg[] = "gpuops-lab pause\n";
        (void)!write(1, msg, sizeof(msg) - 1);
        return 0;
    }
    if (getpid() != 1)
        (void)!write(2, "pause: not PID 1\n", 17);
    term.sa_handler = on_term;
    sigaction(SIGINT, &term, NULL);
    sigaction(SIGTERM, &term, NULL);
    child.sa_handler = on_child;
    child.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &child, NULL);
    for (;;)
        pause();
    return 1;
}
