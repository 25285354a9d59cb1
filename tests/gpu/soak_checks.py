"""The checks of the soak benchmark (tests/gpu/soak.py; docs/accounting.md, "Soak"): each takes
what the run collected and returns (ok, detail, figures). Pure functions over plain data:

  tenant   {"name", "cap" (0..1), "quota" (bytes), "sessions": [session], "probes": [session],
            "records": [usage record of the fake agent, one per record id]}
  session  {"role", "session_id" (None: never seen open), "rc", "out", "mix" (the SHARE_MIX
            line's figures, or None)}
  sample   {"t" (s from the window's start), "backends": [{"rss_kb", "fds", "workers":
            {pid: [rss_kb, fds]}}]}
"""


def inside(records, w0, w1):
    """the records whose interval lies within [w0, w1] (CLOCK_REALTIME ns)"""
    return [r for r in records if r["start_ns"] >= w0 and r["end_ns"] <= w1]


def of_session(tenant, s):
    return [r for r in tenant["records"] if r["session_id"] == s["session_id"]]


def union_ns(intervals):
    """length of the union of [a, b) intervals"""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def rates(tenant, w0, w1, shared_by_id):
    """the tenant's raw and shared GPU time per second of wall time over [w0, w1]: for each of
    its sessions the busy time of its records inside the window over the time they cover,
    summed over the sessions (the rate the GPU-share bucket charges: every session's own busy
    time, overlaps counted once per session)"""
    raw = shared = 0.0
    covered = 0
    for s in tenant["sessions"]:
        recs = inside(of_session(tenant, s), w0, w1)
        span = sum(r["end_ns"] - r["start_ns"] for r in recs)
        if not span:
            continue
        covered += 1
        raw += sum(r["gpu_busy_ns"] for r in recs) / span
        shared += sum(shared_by_id.get(r["record_id"], 0) for r in recs) / span
    return raw, shared, covered


def check_shares(tenants, w0, w1, shared_by_id, tol, timed=True):
    """Each capped tenant with heavy sessions (each alone would keep the GPU busy: the GPU is
    oversubscribed) measures its cap within tol (a fraction: 0.05 is 5 points). timed False
    (a sanitized build, whose sessions cannot keep a GPU busy): the figures, not checked."""
    bad, fig = [], {}
    for t in tenants:
        raw, shared, covered = rates(t, w0, w1, shared_by_id)
        throttled = sum(r["throttled_ns"] for r in inside(t["records"], w0, w1)) / 1e9
        heavy = [s for s in t["sessions"] if s["role"] == "heavy"]
        fig[t["name"]] = {"cap": t["cap"], "raw": round(raw, 4), "shared": round(shared, 4),
                          "throttled_s": round(throttled, 3)}
        if t["cap"] >= 1 or not heavy or not timed:
            fig[t["name"]]["checked"] = False  # uncapped, or not asking for more than its cap
            continue
        fig[t["name"]]["checked"] = True
        if covered < len(t["sessions"]):
            bad.append(f"{t['name']}: {len(t['sessions']) - covered} sessions without a record "
                       "inside the measured window")
        if abs(raw - t["cap"]) > tol:
            bad.append(f"{t['name']}: measured {raw:.1%}, cap {t['cap']:.0%}")
    detail = "; ".join(bad) or ("" if timed else "not checked under ASan (timings): ") + \
        ", ".join(f"{k} {v['raw']:.1%} (cap {v['cap']:.0%}, billed {v['shared']:.1%})"
                  for k, v in fig.items())
    return not bad, detail, fig


def progressed(role, r):
    if role == "copy":
        return r["bytes_htod"] + r["bytes_dtoh"] > 0
    return r["kernels"] > 0 and r["gpu_busy_ns"] > 0


def check_starvation(tenants, w0, w1):
    """Every regular session ended well and printed its figures; every heavy session made
    progress (kernels) in every usage interval inside the window; every light session reports
    its latency p99. The light and copy sessions' intervals without progress (a launch, or bytes
    copied) are counted and reported, not a goal."""
    bad, heavy, intervals, idle = [], 0, 0, {"light": [0, 0], "copy": [0, 0]}
    p99 = []
    for t in tenants:
        for s in t["sessions"]:
            who = f"{t['name']} {s['role']} session {s['session_id']}"
            if s["rc"] != 0 or not s["mix"]:
                bad.append(f"{who}: exit status {s['rc']}: {s['out'][-300:]!r}")
                continue
            if s["role"] == "idle":
                continue
            recs = inside(of_session(t, s), w0, w1)
            if not recs:
                bad.append(f"{who}: no usage record inside the window")
                continue
            stalled = [r for r in recs if not progressed(s["role"], r)]
            if s["role"] == "heavy":
                heavy += 1
                intervals += len(recs)
                if stalled:
                    bad.append(f"{who}: no progress in {len(stalled)} of {len(recs)} intervals "
                               f"(first at {(stalled[0]['start_ns'] - w0) / 1e9:.1f} s)")
            else:
                idle[s["role"]][0] += len(stalled)
                idle[s["role"]][1] += len(recs)
            if s["role"] == "light":
                if s["mix"]["ops"] <= 0 or s["mix"]["lat_p99_us"] <= 0:
                    bad.append(f"{who}: no latency reported")
                p99.append(s["mix"]["lat_p99_us"])
    p99.sort()
    fig = {"heavy_sessions": heavy, "heavy_intervals": intervals,
           "intervals_without_progress": {k: {"of": v[1], "none": v[0]} for k, v in idle.items()},
           "light_p99_us": {"sessions": len(p99), "median": p99[len(p99) // 2] if p99 else None,
                            "worst": p99[-1] if p99 else None}}
    detail = "; ".join(bad[:8]) or (
        f"{heavy} heavy sessions progressed in each of their {intervals} intervals; "
        f"{len(p99)} light sessions' p99: median {fig['light_p99_us']['median']:.0f} us, worst "
        f"{fig['light_p99_us']['worst']:.0f} us; intervals without progress (reported, not a "
        f"goal): light {idle['light'][0]} of {idle['light'][1]}, copy {idle['copy'][0]} of "
        f"{idle['copy'][1]}" if p99 else "no light session")
    return not bad, detail, fig


def check_quota(tenants):
    """Every probe (a copy session started past the quota) got the refusal, the refusals are
    counted in its records and nowhere else, and the regular sessions' high-water marks add up
    to at most the quota."""
    bad, fig = [], {}
    for t in tenants:
        held = sum(max((r["memory_high_water"] for r in of_session(t, s)), default=0)
                   for s in t["sessions"])
        regular = sum(r["quota_refusals"] for s in t["sessions"] for r in of_session(t, s))
        probe_refusals = 0
        for p in t["probes"]:
            n = sum(r["quota_refusals"] for r in of_session(t, p)) if p["session_id"] else 0
            probe_refusals += n
            told = "memory quota" in p["out"] and "out of memory" in p["out"]
            if p["rc"] == 0 or not told or n < 1:
                bad.append(f"{t['name']}: a probe past the quota: exit status {p['rc']}, "
                           f"{n} refusals counted, told: {told}: {p['out'][-300:]!r}")
        fig[t["name"]] = {"quota": t["quota"], "held": held, "probes": len(t["probes"]),
                          "refusals": probe_refusals, "regular_refusals": regular}
        if held > t["quota"]:
            bad.append(f"{t['name']}: sessions held {held} B, quota {t['quota']} B")
        if regular:
            bad.append(f"{t['name']}: {regular} refusals in the regular sessions' records")
    detail = "; ".join(bad) or ", ".join(
        f"{k} {v['refusals']} of {v['probes']} refused (held {v['held'] / 2**20:.1f} of "
        f"{v['quota'] / 2**20:.0f} MiB)" for k, v in fig.items())
    return not bad, detail, fig


def flat_split(samples, warmup, seconds, regular):
    """the samples after the warm-up taken while only the regular workers ran (regular[b]: their
    pids for backend b), split into those before the window's last third and those in it"""
    ok = [s for s in samples if warmup <= s["t"] <= seconds + 0.5 and all(
        set(b["workers"]) == regular[i] for i, b in enumerate(s["backends"]))]
    cut = seconds - (seconds - warmup) / 3
    early, late = [s for s in ok if s["t"] < cut], [s for s in ok if s["t"] >= cut]
    return (early, late) if early and late else (None, None)


def growth(early, late, get):
    """RSS growth: the highest in the last third against the highest before it (a buffer
    allocated and freed with each copy swings it; a leak raises its peak)"""
    return max(get(s) for s in late) - max(get(s) for s in early)


def check_flat(samples, warmup, seconds, regular, slack_kb, rss_checked, worker_slack_kb=None):
    """RSS growth within slack_kb (the highest RSS in the window's last third against the highest
    after the warm-up before it) and open descriptors equal (the first sample after the warm-up
    against the last one), for every backend and every one of its workers."""
    worker_slack_kb = slack_kb if worker_slack_kb is None else worker_slack_kb
    early, late = flat_split(samples, warmup, seconds, regular)
    if not early:
        return False, "no samples after the warm-up both before and in the window's last " \
            "third with only the regular workers running", {}
    first, last = early[0], late[-1]
    bad = []
    fig = {"first_t": first["t"], "last_t": last["t"], "backends": [], "workers_max_growth_kb": 0}
    for i in range(len(first["backends"])):
        a, b = first["backends"][i], last["backends"][i]
        grew = growth(early, late, lambda s: s["backends"][i]["rss_kb"])
        fig["backends"].append({"rss_kb": [a["rss_kb"], b["rss_kb"]], "growth_kb": grew,
                                "fds": [a["fds"], b["fds"]]})
        if rss_checked and grew > slack_kb:
            bad.append(f"backend {i}: RSS grew {grew / 1024:.1f} MB")
        if a["fds"] != b["fds"]:
            bad.append(f"backend {i}: {a['fds']} -> {b['fds']} open descriptors")
        for pid in a["workers"]:
            grew = growth(early, late, lambda s: s["backends"][i]["workers"][pid][0])
            fig["workers_max_growth_kb"] = max(fig["workers_max_growth_kb"], grew)
            if rss_checked and grew > worker_slack_kb:
                bad.append(f"backend {i} worker {pid}: RSS grew {grew / 1024:.1f} MB")
            fd0, fd1 = a["workers"][pid][1], b["workers"][pid][1]
            if fd0 != fd1:
                bad.append(f"backend {i} worker {pid}: {fd0} -> {fd1} open descriptors")
    detail = "; ".join(bad[:8]) or (
        f"samples from {first['t']:.0f} s to {last['t']:.0f} s: backends' RSS "
        + ", ".join(f"{b['rss_kb'][0] / 1024:.1f}->{b['rss_kb'][1] / 1024:.1f}"
                    for b in fig["backends"])
        + f" MB, descriptors equal; workers' RSS grew at most "
        f"{fig['workers_max_growth_kb'] / 1024:.1f} MB" + ("" if rss_checked else
                                                           " (RSS not checked under ASan)"))
    return not bad, detail, fig


def check_after_close(base, after, slack_kb, rss_checked):
    """base, after: per backend {"rss_kb", "fds", "workers_left", "gone_s", "grace_kills"}"""
    bad = []
    for i, (b, a) in enumerate(zip(base, after)):
        if rss_checked and a["rss_kb"] > b["rss_kb"] + slack_kb:
            bad.append(f"backend {i}: RSS {a['rss_kb'] / 1024:.1f} MB, baseline "
                       f"{b['rss_kb'] / 1024:.1f} MB")
        if a["fds"] != b["fds"]:
            bad.append(f"backend {i}: {a['fds']} open descriptors, baseline {b['fds']}")
        if a["workers_left"] or a["grace_kills"]:
            bad.append(f"backend {i}: {a['workers_left']} workers left, {a['grace_kills']} "
                       "killed after the grace period")
    gone = max((a["gone_s"] for a in after if a["gone_s"] is not None), default=None)
    detail = "; ".join(bad) or (
        "backends' RSS " + ", ".join(f"{b['rss_kb'] / 1024:.1f}->{a['rss_kb'] / 1024:.1f}"
                                     for b, a in zip(base, after))
        + f" MB (baseline -> after), descriptors back; every worker ended on its own, the last "
        f"{gone:.2f} s after its guest" + ("" if rss_checked else " (RSS not checked under ASan)"))
    return not bad, detail, {"baseline": base, "after": after}


def check_billing(records, agent, tol):
    """records: every tenant's records (one per id); agent: sluice-share-check's answer. The sum
    of the shared figures is the union of every session's busy intervals (per GPU) within tol;
    the agent apportioned exactly that union; no record refused by the agent's checks."""
    by_gpu = {}
    for r in records:
        by_gpu.setdefault(r["gpu_uuid"], []).extend(r["busy"])
    busy = sum(union_ns(v) for v in by_gpu.values())
    raw = sum(p["raw_ns"] for p in agent["projects"].values())
    shared = sum(p["shared_ns"] for p in agent["projects"].values())
    fig = {"gpu_busy_s": busy / 1e9, "raw_s": raw / 1e9, "shared_s": shared / 1e9,
           "records": agent["records"], "rejected": agent["rejected"],
           "windows": agent["windows"], "apportioned_s": agent["busy_ns"] / 1e9,
           "widened_s": sum(r["busy_widened_ns"] for r in records) / 1e9}
    bad = []
    if agent["rejected"]:
        bad.append(f"{agent['rejected']} records refused by the agent's checks")
    if not busy or abs(shared - busy) > tol * busy:
        bad.append(f"billed {shared / 1e9:.3f} s, GPU busy {busy / 1e9:.3f} s")
    if agent["busy_ns"] != busy:
        bad.append(f"the agent apportioned {agent['busy_ns']} ns, the union is {busy} ns")
    detail = "; ".join(bad) or (
        f"billed (shared) {shared / 1e9:.3f} s = GPU busy {busy / 1e9:.3f} s "
        f"({(shared - busy) / busy:+.3%}); raw sum {raw / 1e9:.3f} s ({raw / busy:.2f}x) over "
        f"{agent['records']} records; {fig['widened_s']:.3f} s of gaps in the intervals of "
        "records of more than 256 (busy_widened_ns) count as busy")
    return not bad, detail, fig
