// shareable_ipc: POSIX file descriptor shareable handles between two processes of one guest
// (issue 20; the calls of streamOrderedAllocationIPC and memMapIPCDrv). Without arguments this
// process forks and executes itself as the importer before it touches CUDA, with one end of a
// Unix socket. Then it exports: a memory pool created with the POSIX file descriptor handle type
// and an allocation from it filled with values (cudaMemPoolExportToShareableHandle,
// cudaMemPoolExportPointer), and a cuMemCreate allocation of that handle type, mapped and filled
// (cuMemExportToShareableHandle); both descriptors go over the socket with SCM_RIGHTS, the
// pointer's export data with them, and the exporter closes its descriptors. The importer imports
// the pool, the pointer and the allocation (mapped in an address range of its own), checks every
// value, writes new ones, and checks that a descriptor of something else (a pipe, the other kind
// of handle) is refused. The exporter checks the importer's values in its own memory.
// Roles for tests/e2e/run.py --ipc-attacks (another instance, another tenant, a forged handle, a
// handle after its exporter ended): "export" prints the bytes of its two descriptors' files, their
// seals and the pointer's export data, and keeps its memory until a line on stdin, then checks it
// is intact; "import POOL SEALS PTR ALLOC SEALS" recreates such descriptors from the bytes (memfds
// with the same content and seals) and every import must be refused.
#include "driver.cuh"
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

static const int kN = 1 << 16;
static const unsigned char kPattern = 0x5c;
static const CUmemAllocationHandleType kFd = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

struct Msg { // what travels with the two descriptors
    cudaMemPoolPtrExportData ptr;
    unsigned long long vmm_size;
};

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

static std::vector<unsigned char> unhex(const char *s)
{
    std::vector<unsigned char> out;
    for (size_t i = 0; s[i] && s[i + 1]; i += 2) {
        unsigned v = 0;
        if (std::sscanf(s + i, "%2x", &v) != 1)
            FAIL("bad hex %s", s);
        out.push_back(static_cast<unsigned char>(v));
    }
    return out;
}

static const char *name(CUresult r)
{
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

static void send_fds(int sock, const Msg &m, int fd0, int fd1)
{
    struct iovec iov = {const_cast<Msg *>(&m), sizeof m};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    std::memset(&ctl, 0, sizeof ctl);
    struct msghdr mh;
    std::memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.b;
    mh.msg_controllen = sizeof ctl.b;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(2 * sizeof(int));
    int fds[2] = {fd0, fd1};
    std::memcpy(CMSG_DATA(c), fds, sizeof fds);
    if (sendmsg(sock, &mh, 0) != (ssize_t)sizeof m)
        FAIL("sendmsg: %s", std::strerror(errno));
}

static void recv_fds(int sock, Msg *m, int *fd0, int *fd1)
{
    struct iovec iov = {m, sizeof *m};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct msghdr mh;
    std::memset(&mh, 0, sizeof mh);
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.b;
    mh.msg_controllen = sizeof ctl.b;
    if (recvmsg(sock, &mh, MSG_WAITALL) != (ssize_t)sizeof *m)
        FAIL("recvmsg: %s", std::strerror(errno));
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
        FAIL("no two descriptors came with the message");
    int fds[2];
    std::memcpy(fds, CMSG_DATA(c), sizeof fds);
    *fd0 = fds[0];
    *fd1 = fds[1];
}

static CUmemAllocationProp fd_prop(size_t *gran)
{
    CUmemAllocationProp prop = device0_alloc_prop(gran);
    prop.requestedHandleTypes = kFd;
    CU(cuMemGetAllocationGranularity(gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    return prop;
}

// An address range of size bytes with handle h mapped read-write on device 0.
static CUdeviceptr map_rw(CUmemGenericAllocationHandle h, size_t size)
{
    CUdeviceptr va = 0;
    CU(cuMemAddressReserve(&va, size, 0, 0, 0));
    CU(cuMemMap(va, size, 0, h, 0));
    CUmemAccessDesc acc;
    std::memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CU(cuMemSetAccess(va, size, &acc, 1));
    return va;
}

static void unmap(CUdeviceptr va, size_t size)
{
    CU(cuMemUnmap(va, size));
    CU(cuMemAddressFree(va, size));
}

static cudaMemPool_t fd_pool()
{
    cudaMemPoolProps props;
    std::memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool;
    CHECK(cudaMemPoolCreate(&pool, &props));
    return pool;
}

static void check_ints(const int *d, int n, int mul, int add, const char *what)
{
    std::vector<int> h(n);
    CHECK(cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++)
        if (h[i] != mul * i + add)
            FAIL("%s: element %d is %d, expected %d", what, i, h[i], mul * i + add);
}

static void put_ints(int *d, int n, int mul, int add)
{
    std::vector<int> h(n);
    for (int i = 0; i < n; i++)
        h[i] = mul * i + add;
    CHECK(cudaMemcpy(d, h.data(), n * sizeof(int), cudaMemcpyHostToDevice));
}

// An import that must fail: prints the answer.
static void refused(const char *what, CUresult r)
{
    std::printf("shareable_ipc(importer): %s -> %s\n", what, name(r));
    if (r == CUDA_SUCCESS)
        FAIL("%s was accepted", what);
}

static int importer(int sock)
{
    g_test_name = "shareable_ipc(importer)";
    Msg m;
    int pfd = -1, vfd = -1;
    recv_fds(sock, &m, &pfd, &vfd);
    CHECK(cudaSetDevice(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    // the pool and its allocation
    cudaMemPool_t pool;
    CHECK(cudaMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)pfd,
                                               cudaMemHandleTypePosixFileDescriptor, 0));
    int *p = nullptr;
    CHECK(cudaMemPoolImportPointer(reinterpret_cast<void **>(&p), pool, &m.ptr));
    check_ints(p, kN, 3, 1, "the pool allocation");
    put_ints(p, kN, 3, 1001);
    // the VMM allocation, mapped here
    CUmemGenericAllocationHandle vh;
    CU(cuMemImportFromShareableHandle(&vh, (void *)(uintptr_t)vfd, kFd));
    size_t size = (size_t)m.vmm_size;
    CUdeviceptr va = map_rw(vh, size);
    int vn = (int)(size / sizeof(int));
    check_ints(reinterpret_cast<int *>(va), vn, 7, 2, "the VMM allocation");
    put_ints(reinterpret_cast<int *>(va), vn, 7, 2002);
    CHECK(cudaDeviceSynchronize());
    unmap(va, size);
    CU(cuMemRelease(vh));
    // descriptors of something else
    int pp[2];
    if (pipe(pp))
        FAIL("pipe: %s", std::strerror(errno));
    CUmemoryPool xp;
    refused("a pipe as a pool handle",
            cuMemPoolImportFromShareableHandle(&xp, (void *)(uintptr_t)pp[0], kFd, 0));
    CUmemGenericAllocationHandle xh;
    refused("a pipe as an allocation handle",
            cuMemImportFromShareableHandle(&xh, (void *)(uintptr_t)pp[0], kFd));
    refused("a pool handle as an allocation handle",
            cuMemImportFromShareableHandle(&xh, (void *)(uintptr_t)pfd, kFd));
    refused("an allocation handle as a pool handle",
            cuMemPoolImportFromShareableHandle(&xp, (void *)(uintptr_t)vfd, kFd, 0));
    cudaGetLastError();
    close(pp[0]);
    close(pp[1]);
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(pool));
    CHECK(cudaStreamDestroy(s));
    close(pfd);
    close(vfd);
    std::fflush(stdout);
    if (write(sock, "DONE", 4) != 4)
        FAIL("write: %s", std::strerror(errno));
    return 0;
}

static pid_t spawn(int *sock)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
        FAIL("socketpair: %s", std::strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", std::strerror(errno));
    if (pid == 0) {
        close(sv[0]);
        std::string fd = std::to_string(sv[1]);
        char *argv[] = {const_cast<char *>("shareable_ipc"), const_cast<char *>("importer"),
                        const_cast<char *>(fd.c_str()), nullptr};
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(sv[1]);
    *sock = sv[0];
    return pid;
}

static int exporter()
{
    g_test_name = "shareable_ipc";
    int sock;
    pid_t child = spawn(&sock); // before this process touches CUDA
    CHECK(cudaFree(0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaMemPool_t pool = fd_pool();
    int *p = nullptr;
    CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void **>(&p), kN * sizeof(int), pool, s));
    CHECK(cudaStreamSynchronize(s));
    put_ints(p, kN, 3, 1);
    int pfd = -1;
    CHECK(cudaMemPoolExportToShareableHandle(&pfd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
    Msg m;
    std::memset(&m, 0, sizeof m);
    CHECK(cudaMemPoolExportPointer(&m.ptr, p));
    size_t gran;
    CUmemAllocationProp prop = fd_prop(&gran);
    CUmemGenericAllocationHandle vh;
    CU(cuMemCreate(&vh, gran, &prop, 0));
    CUdeviceptr va = map_rw(vh, gran);
    int vn = (int)(gran / sizeof(int));
    put_ints(reinterpret_cast<int *>(va), vn, 7, 2);
    int vfd = -1;
    CU(cuMemExportToShareableHandle(&vfd, vh, kFd, 0));
    m.vmm_size = gran;
    send_fds(sock, m, pfd, vfd);
    close(pfd); // as the samples do: the importer has its own
    close(vfd);
    char done[4] = {0};
    ssize_t got = 0;
    while (got < 4) {
        ssize_t k = read(sock, done + got, sizeof done - (size_t)got);
        if (k <= 0)
            break;
        got += k;
    }
    int st = 0;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        got != 4 || std::memcmp(done, "DONE", 4))
        FAIL("the importer ended with status %#x", st);
    check_ints(p, kN, 3, 1001, "the pool allocation after the importer");
    check_ints(reinterpret_cast<int *>(va), vn, 7, 2002, "the VMM allocation after the importer");
    unmap(va, gran);
    CU(cuMemRelease(vh));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(pool));
    CHECK(cudaStreamDestroy(s));
    close(sock);
    std::printf("shareable_ipc: the importer read %d ints of a pool allocation and %d of a VMM "
                "allocation of this process through descriptors and wrote them\n",
                kN, vn);
    pass();
    return 0;
}

// A descriptor's file, as the attacks print it: its bytes and its seals.
static std::string file_of(int fd)
{
    struct stat st;
    if (fstat(fd, &st))
        FAIL("fstat: %s", std::strerror(errno));
    std::vector<unsigned char> b((size_t)st.st_size);
    if (pread(fd, b.data(), b.size(), 0) != (ssize_t)b.size())
        FAIL("pread: %s", std::strerror(errno));
    return hex(b.data(), b.size()) + " " + std::to_string(fcntl(fd, F_GET_SEALS));
}

// For the attacks: pool and VMM memory with a known pattern, the handles on stdout, kept until a
// line on stdin.
static int export_only()
{
    g_test_name = "shareable_ipc(export)";
    const size_t bytes = 1 << 20;
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaMemPool_t pool = fd_pool();
    void *p = nullptr;
    CHECK(cudaMallocFromPoolAsync(&p, bytes, pool, s));
    CHECK(cudaMemsetAsync(p, kPattern, bytes, s));
    CHECK(cudaStreamSynchronize(s));
    size_t gran;
    CUmemAllocationProp prop = fd_prop(&gran);
    CUmemGenericAllocationHandle vh;
    CU(cuMemCreate(&vh, gran, &prop, 0));
    CUdeviceptr va = map_rw(vh, gran);
    CU(cuMemsetD8(va, kPattern, gran));
    CHECK(cudaDeviceSynchronize());
    int pfd = -1, vfd = -1;
    CHECK(cudaMemPoolExportToShareableHandle(&pfd, pool, cudaMemHandleTypePosixFileDescriptor, 0));
    cudaMemPoolPtrExportData pd;
    CHECK(cudaMemPoolExportPointer(&pd, p));
    CU(cuMemExportToShareableHandle(&vfd, vh, kFd, 0));
    std::printf("SHARE %s %s %s\n", file_of(pfd).c_str(), hex(&pd, sizeof pd).c_str(),
                file_of(vfd).c_str());
    std::fflush(stdout);
    char buf[64];
    if (!std::fgets(buf, sizeof buf, stdin))
        FAIL("no line on stdin");
    std::vector<unsigned char> back(bytes > gran ? bytes : gran);
    CHECK(cudaMemcpy(back.data(), p, bytes, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < bytes; i++)
        if (back[i] != kPattern)
            FAIL("pool byte %zu is %#x, expected %#x", i, back[i], kPattern);
    CU(cuMemcpyDtoH(back.data(), va, gran));
    for (size_t i = 0; i < gran; i++)
        if (back[i] != kPattern)
            FAIL("VMM byte %zu is %#x, expected %#x", i, back[i], kPattern);
    unmap(va, gran);
    CU(cuMemRelease(vh));
    CHECK(cudaFreeAsync(p, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemPoolDestroy(pool));
    close(pfd);
    close(vfd);
    pass();
    return 0;
}

// A memfd with bytes b and seals.
static int memfd_of(const std::vector<unsigned char> &b, int seals)
{
    int fd = memfd_create("shareable-attack", MFD_ALLOW_SEALING);
    if (fd < 0 || pwrite(fd, b.data(), b.size(), 0) != (ssize_t)b.size() ||
        (seals > 0 && fcntl(fd, F_ADD_SEALS, seals) != 0))
        FAIL("memfd: %s", std::strerror(errno));
    return fd;
}

// Imports that must be refused: never memory, never a pool.
static int import_refused(char **a)
{
    g_test_name = "shareable_ipc(import)";
    int pfd = memfd_of(unhex(a[0]), std::atoi(a[1]));
    std::vector<unsigned char> pd = unhex(a[2]);
    int vfd = memfd_of(unhex(a[3]), std::atoi(a[4]));
    if (pd.size() != sizeof(cudaMemPoolPtrExportData))
        FAIL("pointer export data of %zu bytes", pd.size());
    CHECK(cudaFree(0));
    CUmemoryPool pool = nullptr;
    CUresult r = cuMemPoolImportFromShareableHandle(&pool, (void *)(uintptr_t)pfd, kFd, 0);
    std::printf("shareable_ipc(import): pool -> %s\n", name(r));
    if (r == CUDA_SUCCESS)
        FAIL("imported a pool");
    // a pointer into a pool of this process's own
    cudaMemPool_t mine = fd_pool();
    void *p = nullptr;
    cudaError_t e = cudaMemPoolImportPointer(&p, mine, (cudaMemPoolPtrExportData *)pd.data());
    std::printf("shareable_ipc(import): pointer -> %s\n", cudaGetErrorName(e));
    if (e == cudaSuccess) {
        unsigned char b = 0;
        cudaMemcpy(&b, p, 1, cudaMemcpyDeviceToHost);
        FAIL("imported memory at %p (first byte %#x)", p, b);
    }
    cudaGetLastError();
    CUmemGenericAllocationHandle vh;
    r = cuMemImportFromShareableHandle(&vh, (void *)(uintptr_t)vfd, kFd);
    std::printf("shareable_ipc(import): allocation -> %s\n", name(r));
    if (r == CUDA_SUCCESS)
        FAIL("imported an allocation");
    // the session goes on
    CHECK(cudaMemPoolDestroy(mine));
    void *x;
    CHECK(cudaMalloc(&x, 4096));
    CHECK(cudaFree(x));
    close(pfd);
    close(vfd);
    pass();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !std::strcmp(argv[1], "importer"))
        return importer(std::atoi(argv[2]));
    if (argc == 2 && !std::strcmp(argv[1], "export"))
        return export_only();
    if (argc == 7 && !std::strcmp(argv[1], "import"))
        return import_refused(argv + 2);
    return exporter();
}
