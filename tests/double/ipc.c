/* CUDA IPC between processes: memory and event handles.
 * TEST DOUBLE: never a GPU result (README.md).
 *
 * Memory: cuIpcGetMemHandle moves the allocation's pages into a memfd (its bytes copied, the
 * memfd mapped over the same addresses) that the handle names by the exporter's pid and fd; a
 * process that opens the handle maps the same memfd through /proc/PID/fd/FD, so both see each
 * other's writes, as two processes of one GPU do. The memfd is closed when the exporter frees
 * the allocation, and goes with the exporter: a handle opened after that fails with
 * CUDA_ERROR_INVALID_VALUE. Events: execution
 * is synchronous here, so an event another process recorded is complete by the time anybody can
 * wait for it; an opened event handle is a new event of this process (the cross-process order
 * of a real GPU is not modelled). */
#include "core.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "context.h"
#include "ipc.h"

static const char MEM_MAGIC[8] = "SLDBLMEM";
static const char EVT_MAGIC[8] = "SLDBLEVT";

struct mem_handle { /* inside CUipcMemHandle (64 bytes) */
    char magic[8];
    uint64_t size;
    int32_t pid, fd;
};
_Static_assert(sizeof(struct mem_handle) <= sizeof(CUipcMemHandle), "fits a CUipcMemHandle");
_Static_assert(sizeof(CUipcMemHandle) == DBL_IPC_BYTES, "64 bytes");
_Static_assert(sizeof(CUmemPoolPtrExportData) == DBL_IPC_BYTES, "64 bytes");

struct evt_handle { /* inside CUipcEventHandle */
    char magic[8];
    uint32_t pid;
    uint32_t flags;
};
_Static_assert(sizeof(struct evt_handle) <= sizeof(CUipcEventHandle), "fits a handle");

static size_t pages(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    n = (n + 255) & ~(size_t)255;
    return (n + pg - 1) & ~(pg - 1);
}

/* The allocation's pages into a memfd, mapped where they were. */
static CUresult share(struct dbl_alloc *a)
{
    int fd = memfd_create("sluice-dbl-ipc", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    size_t n = pages(a->size);
    if (ftruncate(fd, (off_t)n) == 0 && pwrite(fd, (void *)a->base, n, 0) == (ssize_t)n &&
        mmap((void *)a->base, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) !=
            MAP_FAILED) {
        a->ipc_fd1 = fd + 1;
        return CUDA_SUCCESS;
    }
    close(fd);
    return CUDA_ERROR_OPERATING_SYSTEM;
}

CUresult dbl_ipc_export(CUdeviceptr dptr, const char magic[8], void *out)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    struct dbl_alloc *a = out && dptr ? alloc_find(dptr, 1) : NULL;
    if (!a || a->kind != A_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (!a->ipc_fd1 && (rc = share(a)) != CUDA_SUCCESS)
        return rc;
    struct mem_handle m = {.size = a->size, .pid = (int32_t)getpid(), .fd = a->ipc_fd1 - 1};
    memcpy(m.magic, magic, sizeof m.magic);
    memset(out, 0, DBL_IPC_BYTES);
    memcpy(out, &m, sizeof m);
    return CUDA_SUCCESS;
}

static CUresult get_mem(CUipcMemHandle *h, CUdeviceptr dptr)
{
    return dbl_ipc_export(dptr, MEM_MAGIC, h ? h->reserved : NULL);
}

EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    LOCKED(get_mem(pHandle, dptr));
}

static CUresult open_mem(CUdeviceptr *out, const CUipcMemHandle *h, unsigned flags)
{
    if (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
        return CUDA_ERROR_INVALID_VALUE;
    return dbl_ipc_open(h->reserved, MEM_MAGIC, out);
}

CUresult dbl_ipc_open(const void *in, const char magic[8], CUdeviceptr *out)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    struct mem_handle m;
    memcpy(&m, in, sizeof m);
    if (!out || memcmp(m.magic, magic, sizeof m.magic) || !m.size || m.pid <= 0 || m.fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (m.pid == (int32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT; /* the exporting process itself, as the driver */
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)m.pid, (int)m.fd);
    char target[64] = "";
    if (readlink(path, target, sizeof target - 1) < 0 ||
        strncmp(target, "/memfd:sluice-dbl-ipc", 21))
        return CUDA_ERROR_INVALID_VALUE; /* its exporter freed it or ended */
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct stat st;
    void *p = fstat(fd, &st) == 0 && (uint64_t)st.st_size >= pages(m.size)
                  ? dev_map_fd(pages(m.size), fd)
                  : NULL;
    close(fd);
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    rc = alloc_add((uintptr_t)p, m.size, A_IPC, c);
    if (rc) {
        munmap(p, pages(m.size));
        return rc;
    }
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    LOCKED(open_mem(pdptr, &handle, Flags));
}

static CUresult close_mem(CUdeviceptr dptr)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    return alloc_free(dptr, A_IPC);
}

EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    LOCKED(close_mem(dptr));
}

static CUresult get_event(CUipcEventHandle *h, CUevent ev)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    struct dbl_event *e = obj_get(ev, K_EVENT);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!h || !(e->flags & CU_EVENT_INTERPROCESS))
        return CUDA_ERROR_INVALID_VALUE;
    struct evt_handle m = {.pid = (uint32_t)getpid(), .flags = e->flags};
    memcpy(m.magic, EVT_MAGIC, sizeof m.magic);
    memset(h, 0, sizeof *h);
    memcpy(h->reserved, &m, sizeof m);
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *pHandle, CUevent event)
{
    LOCKED(get_event(pHandle, event));
}

static CUresult open_event(CUevent *out, const CUipcEventHandle *h)
{
    struct dbl_ctx *c;
    CUresult rc = need_ctx(&c);
    if (rc)
        return rc;
    struct evt_handle m;
    memcpy(&m, h->reserved, sizeof m);
    if (!out || memcmp(m.magic, EVT_MAGIC, sizeof m.magic) || !(m.flags & CU_EVENT_INTERPROCESS))
        return CUDA_ERROR_INVALID_VALUE;
    if (m.pid == (uint32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT;
    struct dbl_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->hdr = (struct dbl_obj){K_EVENT, c};
    e->flags = m.flags;
    obj_add(e);
    *out = (CUevent)e;
    return CUDA_SUCCESS;
}

EXPORT CUresult cuIpcOpenEventHandle(CUevent *phEvent, CUipcEventHandle handle)
{
    LOCKED(open_event(phEvent, &handle));
}
