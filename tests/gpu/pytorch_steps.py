#!/usr/bin/env python3
"""One step of the PyTorch suite (tests/gpu/pytorch_suite.py runs each step in its own process,
natively and through Sluice, and compares what they print).

usage: pytorch_steps.py STEP OUT.json
Writes {"values": {...}, "times": {...}} to OUT.json: values are what native and Sluice must
agree on (lists of floats, or hex digests of tensors' bytes where the operation is deterministic),
times are seconds. Every step seeds everything and uses fixed shapes so runs are comparable."""
import hashlib
import json
import sys
import time

T_START = time.time()

import torch  # noqa: E402

DEV = "cuda"


def digest(t):
    t = t.detach()
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: hash the raw 16-bit patterns
        t = t.view(torch.int16)
    return hashlib.sha256(t.contiguous().cpu().numpy().tobytes()).hexdigest()[:32]


def summary(t):
    t = t.detach().float().cpu()
    return [float(t.sum()), float(t.abs().sum()), float(t.flatten()[0]), float(t.flatten()[-1])]


def seed(n=1234):
    torch.manual_seed(n)
    torch.cuda.manual_seed_all(n)


def step_discovery(v, _t):
    v["is_available"] = torch.cuda.is_available()
    v["device_count"] = torch.cuda.device_count()
    p = torch.cuda.get_device_properties(0)
    v["props"] = [p.name, p.total_memory, p.major, p.minor, p.multi_processor_count]
    free, total = torch.cuda.mem_get_info()
    v["mem_total"] = total
    v["free_positive"] = free > 0
    x = torch.empty(64 << 20, dtype=torch.uint8, device=DEV)
    v["allocated"] = torch.cuda.memory_allocated()
    v["reserved_ge"] = torch.cuda.memory_reserved() >= x.numel()
    del x
    torch.cuda.empty_cache()
    v["after_free"] = torch.cuda.memory_allocated()
    v["capability"] = list(torch.cuda.get_device_capability(0))
    with open("/proc/self/maps") as f:  # which driver libraries this process uses (the log)
        libs = sorted({ln.split()[-1] for ln in f if "libcuda.so" in ln or "libnvidia-ml" in ln})
    print("discovery: driver libraries loaded:", ", ".join(libs) or "none")


def step_tensors(v, t):
    seed()
    t0 = time.time()
    a = torch.arange(1 << 20, dtype=torch.float32, device=DEV)
    b = torch.randn(1 << 20, device=DEV)
    host = torch.randn(4 << 20)
    d = host.to(DEV)
    v["roundtrip_equal"] = bool(torch.equal(d.cpu(), host))
    pinned = torch.randn(4 << 20).pin_memory()
    dp = pinned.to(DEV, non_blocking=True)
    torch.cuda.synchronize()
    v["pinned_roundtrip_equal"] = bool(torch.equal(dp.cpu(), pinned))
    c = a * 2 + b.sin() - (a / 7).floor()
    v["elementwise"] = digest(c)
    v["reductions"] = [float(c.sum()), float(c.max()), float(c.min()), float(c.mean())]
    v["argmax"] = int(c.argmax())
    idx = torch.randint(0, 1 << 20, (4096,), device=DEV)
    v["gather"] = digest(c[idx])
    c[idx] = 0.5
    v["scatter"] = digest(c)
    v["masked"] = float(c[c > 100].sum())
    v["sort"] = digest(torch.sort(b)[0])
    v["cumsum"] = summary(torch.cumsum(b, 0))
    torch.cuda.synchronize()
    t["tensors"] = time.time() - t0


def step_matmul(v, t):
    seed()
    t0 = time.time()
    a = torch.randn(1024, 1024, device=DEV)
    b = torch.randn(1024, 1024, device=DEV)
    torch.backends.cuda.matmul.allow_tf32 = False
    v["matmul_fp32"] = digest(a @ b)
    torch.backends.cuda.matmul.allow_tf32 = True
    v["matmul_tf32"] = digest(a @ b)
    torch.backends.cuda.matmul.allow_tf32 = False
    v["matmul_bf16"] = digest(a.bfloat16() @ b.bfloat16())
    v["addmm_lt"] = digest(torch.nn.functional.linear(a, b, torch.randn(1024, device=DEV)))
    v["bmm"] = digest(torch.bmm(a.view(16, 64, 1024), b.view(16, 1024, 64)))
    torch.cuda.synchronize()
    t["matmul"] = time.time() - t0


def step_fft(v, t):
    seed()
    t0 = time.time()
    f = torch.fft.rfft(torch.randn(1 << 16, device=DEV))
    v["fft"] = summary(f.abs())
    torch.cuda.synchronize()
    t["fft"] = time.time() - t0


def step_solve(v, t):
    seed()
    t0 = time.time()
    a = torch.randn(1024, 1024, device=DEV)
    b = torch.randn(1024, 1024, device=DEV)
    x = torch.linalg.solve(a + 1024 * torch.eye(1024, device=DEV), b)
    v["solve"] = summary(x)
    torch.cuda.synchronize()
    t["solve"] = time.time() - t0


def step_conv(v, t):
    seed()
    t0 = time.time()
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    conv = torch.nn.Conv2d(16, 32, 3, padding=1).to(DEV)
    x = torch.randn(8, 16, 64, 64, device=DEV, requires_grad=True)
    y = conv(x)
    y.square().mean().backward()
    v["conv_fwd"] = summary(y)
    v["conv_wgrad"] = summary(conv.weight.grad)
    v["conv_dgrad"] = summary(x.grad)
    torch.cuda.synchronize()
    t["conv"] = time.time() - t0


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2), torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.f(x)


class Gpt(torch.nn.Module):
    def __init__(self, vocab=512, d=256, heads=4, layers=4, ctx=128):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(ctx, d)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                                 norm_first=True)
        self.blocks = torch.nn.TransformerEncoder(layer, layers)
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab)
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(ctx))

    def forward(self, idx):
        n = idx.shape[1]
        h = self.tok(idx) + self.pos(torch.arange(n, device=idx.device))
        h = self.blocks(h, mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.ln(h))


def train(model, batch, loss_fn, steps, t, name):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses, times = [], []
    for i in range(steps):
        torch.cuda.synchronize()
        s0 = time.time()
        x, y = batch(i)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))  # synchronizes, as a training loop printing its loss does
        times.append(time.time() - s0)
        if i == 0:
            t[name + "_first_step_since_start"] = time.time() - T_START
    times.sort()
    t[name + "_step_median"] = times[len(times) // 2]
    return losses


def step_train_cnn(v, t):
    seed()
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    model = Cnn().to(DEV)
    g = torch.Generator(device=DEV).manual_seed(7)

    def batch(_i):
        x = torch.randn(64, 3, 32, 32, device=DEV, generator=g)
        return x, (x.mean(dim=(1, 2, 3)) * 40).long().clamp(-5, 4) + 5

    v["cnn_loss"] = train(model, batch, torch.nn.functional.cross_entropy, 200, t, "cnn")


def step_train_gpt(v, t):
    seed()
    model = Gpt().to(DEV)
    g = torch.Generator(device=DEV).manual_seed(7)

    def batch(_i):
        x = torch.randint(0, 512, (16, 129), device=DEV, generator=g)
        x[:, 1::2] = (x[:, 0::2][:, :64] * 3 + 1) % 512
        return x[:, :-1], x[:, 1:]

    def loss_fn(logits, y):
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 y.reshape(-1))

    v["gpt_loss"] = train(model, batch, loss_fn, 200, t, "gpt")


def step_graphs(v, t):
    seed()
    t0 = time.time()
    lin = torch.nn.Linear(512, 512).to(DEV)
    static_x = torch.randn(64, 512, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            lin(static_x).relu()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = lin(static_x).relu().sum(dim=1)
    out = []
    for i in range(5):
        static_x.copy_(torch.full((64, 512), float(i) / 10, device=DEV))
        g.replay()
        out.append(float(static_y.detach().sum()))
    v["graph_replays"] = out
    t["graphs"] = time.time() - t0


def step_compile(v, t):
    seed()
    t0 = time.time()

    def f(x, y):
        return (x.sin() * y.cos() + x * y).relu().sum(dim=-1)

    cf = torch.compile(f)
    x = torch.randn(1024, 1024, device=DEV)
    y = torch.randn(1024, 1024, device=DEV)
    r = cf(x, y)
    v["compile"] = summary(r)
    v["compile_matches_eager"] = bool(torch.allclose(r, f(x, y), rtol=1e-5, atol=1e-4))
    t["compile"] = time.time() - t0


STEPS = {name[5:]: fn for name, fn in globals().items() if name.startswith("step_")}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in STEPS:
        print(__doc__, "steps:", " ".join(STEPS), file=sys.stderr)
        return 2
    values, times = {}, {}
    t0 = time.time()
    STEPS[sys.argv[1]](values, times)
    torch.cuda.synchronize()
    times["step_total"] = time.time() - t0
    times["process_to_end"] = time.time() - T_START
    with open(sys.argv[2], "w") as f:
        json.dump({"values": values, "times": times}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
