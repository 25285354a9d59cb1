// ipc: CUDA IPC between two processes of one guest (issue 20; simpleIPC's calls). Without
// arguments this process forks and executes itself as the importer before it touches CUDA, then
// exports: device memory it filled and an interprocess event, their handles sent over a pipe.
// The importer opens both, checks every value, writes new ones through its mapping and records
// the event; a forged handle and an event handle made of a memory handle must fail there. The
// exporter waits for the event and checks the importer's values in its own allocation.
// Roles for tests/e2e/run.py --ipc-attacks (another instance, another tenant, a forged handle, a
// handle after its exporter ended): "export" prints a memory handle and keeps its memory until a
// line on stdin, then checks it is intact; "import HEX" must be refused and says how.
#include "common.cuh"
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

static const int kN = 1 << 16;
static const unsigned char kPattern = 0xa5;

static std::string hex(const void *p, size_t n)
{
    static const char d[] = "0123456789abcdef";
    std::string s;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = static_cast<const unsigned char *>(p)[i];
        s += d[c >> 4];
        s += d[c & 15];
    }
    return s;
}

static bool unhex(const char *s, void *out, size_t n)
{
    if (std::strlen(s) < 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        if (std::sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        static_cast<unsigned char *>(out)[i] = static_cast<unsigned char>(v);
    }
    return true;
}

static void line(FILE *f, char *buf, size_t n, const char *what)
{
    if (!std::fgets(buf, static_cast<int>(n), f))
        FAIL("no %s from the other process", what);
}

static int importer()
{
    g_test_name = "ipc(importer)";
    char buf[512], mh_hex[160], eh_hex[160];
    line(stdin, buf, sizeof buf, "handles");
    cudaIpcMemHandle_t mh;
    cudaIpcEventHandle_t eh;
    if (std::sscanf(buf, "HANDLES %159s %159s", mh_hex, eh_hex) != 2 ||
        !unhex(mh_hex, &mh, sizeof mh) || !unhex(eh_hex, &eh, sizeof eh))
        FAIL("bad handles line: %s", buf);
    int *p = nullptr;
    CHECK(cudaIpcOpenMemHandle(reinterpret_cast<void **>(&p), mh, cudaIpcMemLazyEnablePeerAccess));
    std::vector<int> h(kN);
    CHECK(cudaMemcpy(h.data(), p, kN * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; i++)
        if (h[i] != 3 * i + 1)
            FAIL("the exporter's element %d reads %d, expected %d", i, h[i], 3 * i + 1);
    for (int i = 0; i < kN; i++)
        h[i] += 1000;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMemcpyAsync(p, h.data(), kN * sizeof(int), cudaMemcpyHostToDevice, s));
    cudaEvent_t ev;
    CHECK(cudaIpcOpenEventHandle(&ev, eh));
    CHECK(cudaEventRecord(ev, s));
    CHECK(cudaStreamSynchronize(s));
    // a forged memory handle, and a memory handle taken for an event handle: refused
    cudaIpcMemHandle_t forged = mh;
    for (size_t i = 0; i < sizeof forged.reserved; i += 7)
        forged.reserved[i] ^= 0x5a;
    void *q = nullptr;
    cudaError_t r = cudaIpcOpenMemHandle(&q, forged, cudaIpcMemLazyEnablePeerAccess);
    std::printf("ipc(importer): forged memory handle -> %s\n", cudaGetErrorName(r));
    if (r == cudaSuccess)
        FAIL("a forged memory handle opened memory at %p", q);
    cudaGetLastError();
    cudaIpcEventHandle_t wrong;
    static_assert(sizeof wrong == sizeof mh, "handles of one size");
    std::memcpy(&wrong, &mh, sizeof wrong);
    cudaEvent_t ev2 = nullptr;
    r = cudaIpcOpenEventHandle(&ev2, wrong);
    std::printf("ipc(importer): memory handle as an event handle -> %s\n", cudaGetErrorName(r));
    if (r == cudaSuccess)
        FAIL("a memory handle opened an event");
    cudaGetLastError();
    std::printf("DONE\n");
    std::fflush(stdout);
    line(stdin, buf, sizeof buf, "goodbye");
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaIpcCloseMemHandle(p));
    CHECK(cudaStreamDestroy(s));
    return 0;
}

static pid_t spawn(const char *role, int *to_child, int *from_child)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        FAIL("pipe: %s", std::strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", std::strerror(errno));
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        char *argv[] = {const_cast<char *>("ipc"), const_cast<char *>(role), nullptr};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    *to_child = in[1];
    *from_child = out[0];
    return pid;
}

static int exporter()
{
    g_test_name = "ipc";
    int to_fd, from_fd;
    pid_t child = spawn("importer", &to_fd, &from_fd); // before this process touches CUDA
    FILE *to = fdopen(to_fd, "w"), *from = fdopen(from_fd, "r");
    if (!to || !from)
        FAIL("fdopen: %s", std::strerror(errno));
    std::vector<int> h(kN);
    for (int i = 0; i < kN; i++)
        h[i] = 3 * i + 1;
    int *d;
    CHECK(cudaMalloc(&d, kN * sizeof(int)));
    CHECK(cudaMemcpy(d, h.data(), kN * sizeof(int), cudaMemcpyHostToDevice));
    cudaIpcMemHandle_t mh;
    CHECK(cudaIpcGetMemHandle(&mh, d));
    cudaEvent_t ev;
    CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess));
    cudaIpcEventHandle_t eh;
    CHECK(cudaIpcGetEventHandle(&eh, ev));
    std::fprintf(to, "HANDLES %s %s\n", hex(&mh, sizeof mh).c_str(), hex(&eh, sizeof eh).c_str());
    std::fflush(to);
    char buf[256];
    while (true) { // the importer's report lines, then DONE
        line(from, buf, sizeof buf, "DONE");
        if (!std::strncmp(buf, "DONE", 4))
            break;
        std::fputs(buf, stdout);
        if (!std::strncmp(buf, "FAIL", 4))
            FAIL("the importer failed");
    }
    CHECK(cudaStreamWaitEvent(0, ev, 0));
    CHECK(cudaMemcpy(h.data(), d, kN * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < kN; i++)
        if (h[i] != 3 * i + 1 + 1000)
            FAIL("element %d is %d after the importer, expected %d", i, h[i], 3 * i + 1 + 1000);
    std::fprintf(to, "BYE\n");
    std::fflush(to);
    while (std::fgets(buf, sizeof buf, from))
        std::fputs(buf, stdout);
    int st = 0;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("the importer ended with status %#x", st);
    CHECK(cudaEventDestroy(ev));
    CHECK(cudaFree(d));
    std::printf("ipc: the importer read %d ints of this process, wrote them through its mapping "
                "and recorded the event\n",
                kN);
    pass();
    return 0;
}

// For the attacks: memory with a known pattern, its handle on stdout, kept until a line on stdin.
static int export_only()
{
    g_test_name = "ipc(export)";
    const size_t bytes = 1 << 20;
    void *d;
    CHECK(cudaMalloc(&d, bytes));
    CHECK(cudaMemset(d, kPattern, bytes));
    CHECK(cudaDeviceSynchronize());
    cudaIpcMemHandle_t mh;
    CHECK(cudaIpcGetMemHandle(&mh, d));
    std::printf("MEM %s\n", hex(&mh, sizeof mh).c_str());
    std::fflush(stdout);
    char buf[64];
    line(stdin, buf, sizeof buf, "line");
    std::vector<unsigned char> back(bytes);
    CHECK(cudaMemcpy(back.data(), d, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++)
        if (back[i] != kPattern)
            FAIL("byte %zu is %#x, expected %#x", i, back[i], kPattern);
    CHECK(cudaFree(d));
    pass();
    return 0;
}

// An open that must be refused: never memory, never an event.
static int import_refused(const char *h)
{
    g_test_name = "ipc(import)";
    cudaIpcMemHandle_t mh;
    if (!unhex(h, &mh, sizeof mh))
        FAIL("bad handle %s", h);
    void *p = nullptr;
    cudaError_t r = cudaIpcOpenMemHandle(&p, mh, cudaIpcMemLazyEnablePeerAccess);
    std::printf("ipc(import): open -> %s\n", cudaGetErrorName(r));
    if (r == cudaSuccess) {
        unsigned char b = 0;
        cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost);
        FAIL("opened memory at %p (first byte %#x)", p, b);
    }
    cudaGetLastError();
    cudaIpcEventHandle_t eh;
    std::memcpy(&eh, &mh, sizeof eh);
    cudaEvent_t ev = nullptr;
    r = cudaIpcOpenEventHandle(&ev, eh);
    std::printf("ipc(import): as an event -> %s\n", cudaGetErrorName(r));
    if (r == cudaSuccess)
        FAIL("opened an event");
    cudaGetLastError();
    // the session goes on
    void *mine;
    CHECK(cudaMalloc(&mine, 4096));
    CHECK(cudaFree(mine));
    pass();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !std::strcmp(argv[1], "importer"))
        return importer();
    if (argc == 2 && !std::strcmp(argv[1], "export"))
        return export_only();
    if (argc == 3 && !std::strcmp(argv[1], "import"))
        return import_refused(argv[2]);
    return exporter();
}
