#!/usr/bin/env python3
"""The soak benchmark's checks (tests/gpu/soak_checks.py) fail where they must: made-up records
and samples of a run that met every goal, then each goal broken in turn (a tenant over its cap,
a starved heavy session, a probe not refused, a refusal in a regular session, RSS grown,
a descriptor leaked, a worker killed, billing that does not add up)."""
import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soak_checks as C  # noqa: E402

S = 10**9


def rec(rid, sid, start, end, busy=(), kernels=1, copied=0, refusals=0, high=0, shared=None):
    busy = [[a * S, b * S] for a, b in busy]
    n = sum(b - a for a, b in busy)
    return {"record_id": rid, "session_id": sid, "start_ns": start * S, "end_ns": end * S,
            "gpu_busy_ns": n, "busy": busy, "busy_widened_ns": 0, "kernels": kernels,
            "bytes_htod": copied, "bytes_dtoh": copied, "quota_refusals": refusals,
            "memory_high_water": high, "throttled_ns": 0, "gpu_uuid": "GPU-0"}


def session(role, sid, rc=0, p99=100.0):
    return {"role": role, "session_id": sid, "rc": rc, "out": "",
            "mix": {"role": role, "ops": 10, "lat_p99_us": p99 if role == "light" else 0}}


def good_run():
    """two tenants capped at 30% and 70%, a heavy and a light session each, from 0 to 20 s;
    the heavy sessions busy 2 and 6 s of each 10 s record, one after the other, the light ones
    1 s (inside the first heavy one's): the GPU busy 8 s of 10"""
    tenants = []
    for i, (cap, first, length) in enumerate(((0.3, 0, 2), (0.7, 3, 6))):
        recs = []
        for k in (0, 1):
            t0 = 10 * k
            recs.append(rec(f"h{i}{k}", 1, t0, t0 + 10, [(t0 + first, t0 + first + length)],
                            high=1 << 20))
            recs.append(rec(f"l{i}{k}", 2, t0, t0 + 10, [(t0 + 1, t0 + 2)], kernels=5))
        recs.append(rec(f"p{i}", 3, 5, 6, kernels=0, refusals=1))
        probe = {"role": "copy", "session_id": 3, "rc": 1,
                 "out": "refused (out of memory): the instance's memory quota of 96 MiB"}
        tenants.append({"name": f"t{i}", "cap": cap, "quota": 96 << 20,
                        "sessions": [session("heavy", 1), session("light", 2)],
                        "probes": [probe], "records": recs})
    return tenants


def samples(rss=(1000, 1000), fd=(20, 20)):
    """a sample at 0 s and one at 20 s"""
    return [{"t": t, "backends": [{"rss_kb": r, "fds": f, "workers": {7: [500, 9]}}]}
            for t, r, f in zip((0, 20), rss, fd)]


class SoakChecks(unittest.TestCase):
    def test_a_good_run_passes(self):
        t = good_run()
        shared = {r["record_id"]: r["gpu_busy_ns"] for x in t for r in x["records"]}
        ok, detail, fig = C.check_shares(t, 0, 20 * S, shared, 0.05)
        self.assertTrue(ok, detail)
        self.assertAlmostEqual(fig["t0"]["raw"], 0.3)
        self.assertTrue(C.check_starvation(t, 0, 20 * S)[0])
        self.assertTrue(C.check_quota(t)[0])
        self.assertTrue(C.check_flat(samples(), 0, 20, [{7}], 4096, True)[0])
        base = [{"rss_kb": 1000, "fds": 20}]
        after = [dict(base[0], workers_left=0, gone_s=0.2, grace_kills=0)]
        self.assertTrue(C.check_after_close(base, after, 4096, True)[0])
        recs = [r for x in t for r in x["records"]]
        agent = {"records": len(recs), "rejected": 0, "windows": 2, "busy_ns": 16 * S,
                 "projects": {"a": {"raw_ns": 6 * S, "shared_ns": 5 * S},
                              "b": {"raw_ns": 14 * S, "shared_ns": 11 * S}}}
        ok, detail, fig = C.check_billing(recs, agent, 0.02)
        self.assertTrue(ok, detail)
        self.assertEqual(fig["gpu_busy_s"], 16)

    def test_over_the_cap(self):
        t = good_run()
        t[0]["records"][0]["gpu_busy_ns"] = 4 * S  # 40% of the 30% tenant's window
        ok, detail, _ = C.check_shares(t, 0, 20 * S, {}, 0.05)
        self.assertFalse(ok)
        self.assertIn("t0: measured 40.0%, cap 30%", detail)
        # a sanitized build's sessions cannot keep a GPU busy: reported, not checked
        ok, detail, _ = C.check_shares(t, 0, 20 * S, {}, 0.05, timed=False)
        self.assertTrue(ok)
        self.assertIn("not checked under ASan", detail)

    def test_a_starved_heavy_session(self):
        t = good_run()
        t[1]["records"][2]["kernels"] = 0  # its second interval
        ok, detail, _ = C.check_starvation(t, 0, 20 * S)
        self.assertFalse(ok)
        self.assertIn("t1 heavy session 1: no progress in 1 of 2 intervals", detail)
        t = good_run()
        t[0]["sessions"][1]["mix"]["lat_p99_us"] = 0
        self.assertIn("no latency reported", C.check_starvation(t, 0, 20 * S)[1])
        # a light session's interval without a launch is counted, not a failure
        t = good_run()
        t[0]["records"][1]["kernels"] = 0
        ok, detail, fig = C.check_starvation(t, 0, 20 * S)
        self.assertTrue(ok, detail)
        self.assertEqual(fig["intervals_without_progress"]["light"], {"of": 4, "none": 1})

    def test_a_probe_not_refused(self):
        t = good_run()
        t[0]["probes"][0]["rc"] = 0
        self.assertFalse(C.check_quota(t)[0])
        t = good_run()
        t[1]["records"][0]["quota_refusals"] = 1
        ok, detail, _ = C.check_quota(t)
        self.assertFalse(ok)
        self.assertIn("refusals in the regular sessions' records", detail)
        t = good_run()
        t[1]["records"][1]["memory_high_water"] = 96 << 20
        self.assertIn("held", C.check_quota(t)[1])

    def test_rss_and_descriptors(self):
        self.assertFalse(C.check_flat(samples(rss=(1000, 9000)), 0, 20, [{7}], 4096, True)[0])
        # under ASan the RSS is not checked, the descriptors are
        self.assertTrue(C.check_flat(samples(rss=(1000, 9000)), 0, 20, [{7}], 4096, False)[0])
        self.assertFalse(C.check_flat(samples(fd=(20, 21)), 0, 20, [{7}], 4096, False)[0])
        s = samples()
        s[1]["backends"][0]["workers"][7] = [500, 10]
        self.assertFalse(C.check_flat(s, 0, 20, [{7}], 4096, True)[0])
        s = samples()
        s[1]["backends"][0]["workers"][7] = [9000, 9]
        self.assertFalse(C.check_flat(s, 0, 20, [{7}], 4096, True)[0])
        self.assertTrue(C.check_flat(s, 0, 20, [{7}], 4096, True, 10000)[0])
        # a swing is not growth: the peak of the last third against the peak before it
        s = samples(rss=(1000, 1000))
        s.insert(1, {"t": 10, "backends": [{"rss_kb": 9000, "fds": 20, "workers": {7: [500, 9]}}]})
        self.assertTrue(C.check_flat(s, 0, 20, [{7}], 4096, True)[0])
        s[2]["backends"][0]["rss_kb"] = 14000
        ok, detail, _ = C.check_flat(s, 0, 20, [{7}], 4096, True)
        self.assertFalse(ok)
        self.assertIn("backend 0: RSS grew 4.9 MB", detail)
        # a sample taken while a probe's worker ran is not compared
        s = samples(fd=(20, 21))
        s[1]["backends"][0]["workers"][8] = [1, 1]
        self.assertFalse(C.check_flat(s, 0, 20, [{7}], 4096, True)[0])
        base = [{"rss_kb": 1000, "fds": 20}]
        after = [dict(base[0], workers_left=0, gone_s=0.2, grace_kills=1)]
        self.assertFalse(C.check_after_close(base, after, 4096, True)[0])
        after = [dict(base[0], fds=21, workers_left=0, gone_s=0.2, grace_kills=0)]
        self.assertFalse(C.check_after_close(base, after, 4096, True)[0])

    def test_billing_that_does_not_add_up(self):
        t = good_run()
        recs = [r for x in t for r in x["records"]]
        agent = {"records": len(recs), "rejected": 0, "windows": 2, "busy_ns": 16 * S,
                 "projects": {"a": {"raw_ns": 6 * S, "shared_ns": 5 * S},
                              "b": {"raw_ns": 14 * S, "shared_ns": 12 * S}}}
        ok, detail, _ = C.check_billing(recs, agent, 0.02)
        self.assertFalse(ok)
        self.assertIn("billed 17.000 s, GPU busy 16.000 s", detail)
        bad = copy.deepcopy(agent)
        bad["projects"]["b"]["shared_ns"] = 11 * S
        bad["rejected"] = 1
        self.assertFalse(C.check_billing(recs, bad, 0.02)[0])


if __name__ == "__main__":
    unittest.main()
