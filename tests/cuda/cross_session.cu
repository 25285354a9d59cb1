// cross_session: one session must not reach another's memory. Without arguments this process
// (which never touches CUDA) starts itself twice: an owner that allocates, fills and prints its
// device pointer, then waits; and an intruder that tries to read and write that address in its
// own session, which must fail cleanly. The owner then checks its data is intact.
#include "common.cuh"
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

static const size_t kBytes = 1 << 20;
static const unsigned char kPattern = 0xa5;

static int owner()
{
    g_test_name = "cross_session(owner)";
    void *p;
    CHECK(cudaMalloc(&p, kBytes));
    CHECK(cudaMemset(p, kPattern, kBytes));
    CHECK(cudaDeviceSynchronize());
    std::printf("PTR %llx\n", (unsigned long long)(uintptr_t)p);
    std::fflush(stdout);
    char line[64];
    if (!std::fgets(line, sizeof line, stdin)) // wait for the intruder to be done
        FAIL("orchestrator went away");
    std::vector<unsigned char> back(kBytes);
    CHECK(cudaMemcpy(back.data(), p, kBytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kBytes; i++)
        if (back[i] != kPattern)
            FAIL("owner's byte %zu is %#x after the intruder, expected %#x", i, back[i], kPattern);
    CHECK(cudaFree(p));
    std::fprintf(stderr, "cross_session(owner): data intact\n");
    return 0;
}

static int intruder(const char *addr)
{
    g_test_name = "cross_session(intruder)";
    void *p = reinterpret_cast<void *>(static_cast<uintptr_t>(std::strtoull(addr, nullptr, 16)));
    std::vector<unsigned char> buf(4096, 0);
    cudaError_t r = cudaMemcpy(buf.data(), p, buf.size(), cudaMemcpyDeviceToHost);
    std::printf("cross_session: read of the other session's %p -> %s\n", p, cudaGetErrorName(r));
    if (r == cudaSuccess)
        FAIL("read another session's memory");
    for (unsigned char c : buf)
        if (c == kPattern)
            FAIL("the other session's bytes reached this one");
    cudaGetLastError();
    r = cudaMemset(p, 0, buf.size());
    std::printf("cross_session: write of the other session's %p -> %s\n", p, cudaGetErrorName(r));
    if (r == cudaSuccess)
        FAIL("wrote another session's memory (cudaMemset succeeded)");
    cudaGetLastError();
    // its own memory still works
    void *mine;
    CHECK(cudaMalloc(&mine, 4096));
    CHECK(cudaMemcpy(mine, buf.data(), 4096, cudaMemcpyHostToDevice));
    CHECK(cudaFree(mine));
    return 0;
}

static pid_t spawn(char *const argv[], int in_fd, int out_fd)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (in_fd >= 0)
            dup2(in_fd, 0);
        if (out_fd >= 0)
            dup2(out_fd, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return pid;
}

static int status_of(pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    if (argc == 2 && !std::strcmp(argv[1], "--owner"))
        return owner();
    if (argc == 3 && !std::strcmp(argv[1], "--intruder"))
        return intruder(argv[2]);
    g_test_name = "cross_session";
    int to_owner[2], from_owner[2];
    if (pipe(to_owner) || pipe(from_owner))
        FAIL("pipe: %s", std::strerror(errno));
    char owner_flag[] = "--owner";
    char *owner_argv[] = {argv[0], owner_flag, nullptr};
    pid_t a = spawn(owner_argv, to_owner[0], from_owner[1]);
    close(to_owner[0]);
    close(from_owner[1]);
    FILE *from = fdopen(from_owner[0], "r");
    char line[128] = {0};
    char addr[64] = {0};
    while (from && std::fgets(line, sizeof line, from))
        if (std::sscanf(line, "PTR %63s", addr) == 1)
            break;
        else
            std::fputs(line, stdout); // the owner's other output (e.g. forwarded logs)
    if (!addr[0]) {
        close(to_owner[1]);
        FAIL("owner printed no pointer (owner exit %d)", status_of(a));
    }
    std::printf("cross_session: owner's pointer 0x%s\n", addr);
    std::fflush(stdout);
    char intr_flag[] = "--intruder";
    char *intr_argv[] = {argv[0], intr_flag, addr, nullptr};
    int rb = status_of(spawn(intr_argv, -1, -1));
    if (write(to_owner[1], "done\n", 5) != 5)
        FAIL("cannot signal the owner");
    close(to_owner[1]);
    while (std::fgets(line, sizeof line, from))
        std::fputs(line, stdout);
    int ra = status_of(a);
    if (rb != 0)
        FAIL("intruder exited %d", rb);
    if (ra != 0)
        FAIL("owner exited %d", ra);
    pass();
    return 0;
}
