"""run.py --ipc-attacks: CUDA IPC handles are tokens the tenant's backend brokers, resolved only
for a session of the exporter's instance (docs/security.md, "IPC handles"). One backend (A)
admits two instances (guest-a, guest-b); guest-a's `ipc export` holds memory filled with a
pattern and prints its handle. Then `ipc import HANDLE` must be refused with the driver's
answer to an invalid handle (cudaErrorInvalidValue), and never see a byte of that memory:
  - from guest-b (another instance of the same backend);
  - from guest-a through another backend (B: another tenant's backend knows no token of A);
  - with the handle forged (bytes changed) on A;
  - on A after the exporter's session ended.
The same for POSIX file descriptor shareable handles (`shareable_ipc export` / `import`): the
guest's descriptors are memfds holding a token, so an attacker who learnt a file's bytes makes
a memfd with the same bytes and seals; its pool, pool pointer and allocation imports must all be
refused as invalid (CUDA_ERROR_INVALID_VALUE / cudaErrorInvalidValue), the forged case with
the token (the file's last 64 bytes, the pointer data) changed.
The exporter's memory must be intact at its end, and A's log must name the refusals. Runs on the
driver double (CI) and on the real driver (--real-driver)."""
import os
import re
import shutil
import subprocess
import tempfile
import time

GUEST_B = "8a1e4c2b-7d3f-4b9a-a1c5-0e9f8d7c6b5a"  # CN of make-demo-pki's guest-b
REFUSED = "ipc(import): open -> cudaErrorInvalidValue"


def conf_for(work, conf, pki, guest):
    """A copy of a backend's guest config folder with another guest's certificate."""
    out = tempfile.mkdtemp(prefix=f"conf-{guest}-", dir=work)
    shutil.copy(os.path.join(conf, "backend.conf"), out)
    shutil.copy(os.path.join(pki, "ca.pem"), os.path.join(out, "ca.pem"))
    shutil.copy(os.path.join(pki, f"{guest}.pem"), os.path.join(out, "client.pem"))
    shutil.copy(os.path.join(pki, f"{guest}.key"), os.path.join(out, "client.key"))
    return out


def importer(h, exe, env, handle, what, problems):
    p = subprocess.run([exe, "import", handle], capture_output=True, env=env, timeout=60,
                       stdin=subprocess.DEVNULL, preexec_fn=h.die_with_parent)
    out = (p.stdout + p.stderr).decode(errors="replace")
    print(f"{what}: rc={p.returncode}: " + " / ".join(
        l for l in out.splitlines() if l.startswith("ipc(import)")))
    if p.returncode != 0 or REFUSED not in out or "PASS ipc(import)" not in out:
        problems.append(f"{what}: not refused as an invalid handle: " + out[-1500:])


SHARE_REFUSED = ["shareable_ipc(import): pool -> CUDA_ERROR_INVALID_VALUE",
                 "shareable_ipc(import): pointer -> cudaErrorInvalidValue",
                 "shareable_ipc(import): allocation -> CUDA_ERROR_INVALID_VALUE"]


def share_importer(h, exe, env, share, what, problems):
    p = subprocess.run([exe, "import"] + share, capture_output=True, env=env, timeout=60,
                       stdin=subprocess.DEVNULL, preexec_fn=h.die_with_parent)
    out = (p.stdout + p.stderr).decode(errors="replace")
    print(f"shareable, {what}: rc={p.returncode}: " + " / ".join(
        l for l in out.splitlines() if l.startswith("shareable_ipc(import)")))
    if p.returncode != 0 or any(r not in out for r in SHARE_REFUSED) or \
            "PASS shareable_ipc(import)" not in out:
        problems.append(f"shareable, {what}: not refused as an invalid handle: " + out[-1500:])


def forge_share(share):
    """The tokens changed: the last 64 bytes of each file, the whole pointer data."""
    pool, pseals, ptr, alloc, aseals = share
    def flip(x, start):
        b = bytearray.fromhex(x)
        for i in range(start, len(b), 3):
            b[i] ^= 0x3c
        return b.hex()
    return [flip(pool, len(pool) // 2 - 64), pseals, flip(ptr, 0),
            flip(alloc, len(alloc) // 2 - 64), aseals]


def forgotten(h, log):
    return h.tail(log, 400).count("IPC handle(s) it exported forgotten")


def forge(handle):
    b = bytearray.fromhex(handle)
    for i in range(0, len(b), 5):
        b[i] ^= 0x3c
    return b.hex()


def run(h, args, pki, work, driver, frontend_dir):
    exe = os.path.join(args.programs_dir, "ipc.static")
    sexe = os.path.join(args.programs_dir, "shareable_ipc.static")
    a = h.Backend(args, pki, work, driver, allow_also=(GUEST_B,))
    b = None
    problems = []
    exporter = sharer = None
    try:
        why = a.wait_ready()
        if why:
            return [why]
        env_a = h.guest_env(args, a, frontend_dir)
        env_b = dict(env_a, SLUICE_CONFIG_DIR=conf_for(work, a.conf, pki, "guest-b"))
        exporter = subprocess.Popen([exe, "export"], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env_a,
                                    start_new_session=True, preexec_fn=h.die_with_parent)
        first = exporter.stdout.readline().decode(errors="replace")
        m = re.match(r"MEM ([0-9a-f]{128})$", first.strip())
        if not m:
            return [f"the exporter printed no handle: {first.strip()}"]
        handle = m.group(1)
        importer(h, exe, env_b, handle, "another instance (guest-b) on the same backend",
                 problems)
        importer(h, exe, env_a, forge(handle), "a forged handle", problems)
        sharer = subprocess.Popen([sexe, "export"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, stdin=subprocess.PIPE, env=env_a,
                                  start_new_session=True, preexec_fn=h.die_with_parent)
        sfirst = sharer.stdout.readline().decode(errors="replace")
        m = re.match(r"SHARE ([0-9a-f]+) (\d+) ([0-9a-f]{128}) ([0-9a-f]+) (\d+)$", sfirst.strip())
        if not m:
            return problems + [f"the shareable exporter printed no handles: {sfirst.strip()}"]
        share = list(m.groups())
        share_importer(h, sexe, env_b, share, "another instance (guest-b) on the same backend",
                       problems)
        share_importer(h, sexe, env_a, forge_share(share), "forged tokens", problems)
        b = h.Backend(args, pki, work, driver)
        why = b.wait_ready()
        if why:
            problems.append(f"backend B: {why}")
        else:
            env_other = h.guest_env(args, b, frontend_dir)
            importer(h, exe, env_other, handle,
                     "the same instance through another backend (another tenant's)", problems)
            share_importer(h, sexe, env_other, share,
                           "the same instance through another backend (another tenant's)",
                           problems)
        out, _ = exporter.communicate(b"end\n", timeout=60)
        out = first + out.decode(errors="replace")
        print(f"exporter: rc={exporter.returncode}")
        if exporter.returncode != 0 or "PASS ipc(export)" not in out:
            problems.append("the exporter's memory was not intact: " + out[-1500:])
        # the server forgets the tokens when it has ended the exporter's session: wait for it
        end = time.time() + 20
        while time.time() < end and forgotten(h, a.log) < 1:
            time.sleep(0.1)
        importer(h, exe, env_a, handle, "after the exporter's session ended", problems)
        before = forgotten(h, a.log)
        sout, _ = sharer.communicate(b"end\n", timeout=60)
        sout = sfirst + sout.decode(errors="replace")
        print(f"shareable exporter: rc={sharer.returncode}")
        if sharer.returncode != 0 or "PASS shareable_ipc(export)" not in sout:
            problems.append("the shareable exporter's memory was not intact: " + sout[-1500:])
        end = time.time() + 20
        while time.time() < end and forgotten(h, a.log) <= before:
            time.sleep(0.1)
        share_importer(h, sexe, env_a, share, "after the exporter's session ended", problems)
    except subprocess.TimeoutExpired as ex:
        problems.append(f"timeout: {ex.cmd}")
    finally:
        if exporter:
            h.kill_group(exporter, 1)
        if sharer:
            h.kill_group(sharer, 1)
        a.stop()
        if b:
            b.stop()
    blog = h.tail(a.log, 400)
    for want in ("the token is another instance's", "unknown token"):
        if want not in blog:
            problems.append(f"backend A's log lacks '{want}'")
    for log in [a.log] + ([b.log] if b else []):
        if h.SANITIZER_REPORT.search(h.tail(log, 400)):
            problems.append("sanitizer report in a backend's log")
    if problems or args.verbose:
        print("---- backend A log ----\n" + h.tail(a.log, 60).rstrip() + "\n----")
    return problems
