"""What runs inside the guest, and what comes back.

The job is the instance's user-data: a bash script that Nova hands the guest (config drive or
metadata service) and the image's first-boot unit runs once, as cloud-init runs user-data
scripts. It mounts the programs disk (label sluice-progs: the tests/cuda programs, NVIDIA's
cudart for the .shared ones), waits for the enrollment the image's sluice-enroll.service does
at boot, runs its steps and writes everything to the second serial port (/dev/ttyS1), which
libvirt (or QEMU) writes to a file on the host:

  @@ JOB START <unix time>
  @@ BEGIN <step>            then the step's output (stdout and stderr)
  @@ END <step> rc=<exit status> s=<seconds>
  @@ SIGNAL <word>           the host acts now (revokes, destroys); the step after it waits
  @@ DONE

Steps are (name, shell command) pairs; the command runs with bash -c in the job's environment
(LD_LIBRARY_PATH=/mnt/progs/lib for NVIDIA's shared cudart; our libcuda.so.1 is the system's,
through the sluice_guest role's ldconfig entry).
"""
import re
import shlex

PROGS = "/mnt/progs"
HEADER = r"""#!/bin/bash
# The Sluice VM test's job (tests/vm/guest_job.py), given to the instance as user-data.
R=/dev/ttyS1
stty -F $R -opost 2>/dev/null
say() { printf '%s\n' "$*" >$R; }
say "@@ JOB START $(date +%s)"
mkdir -p /mnt/progs
if ! mountpoint -q /mnt/progs && ! mount -o ro LABEL=sluice-progs /mnt/progs; then
  say "@@ FATAL cannot mount the programs disk (label sluice-progs)"; exit 1
fi
export LD_LIBRARY_PATH=/mnt/progs/lib PATH=/mnt/progs/bin:$PATH
step() {
  local name=$1; shift
  say "@@ BEGIN $name"
  local t0=$(date +%s%N)
  bash -c "$1" >$R 2>&1
  local rc=$?
  say "@@ END $name rc=$rc s=$(( ($(date +%s%N) - t0) / 1000000 ))e-3"
}
"""
WAIT_ENROLL = r"""
for i in $(seq 1 {timeout}); do
  [ -s /etc/sluice/client.pem ] && ! systemctl is-active -q sluice-enroll.service && break
  sleep 1
done
step enrollment 'journalctl -b -u sluice-enroll.service --no-pager -o short-monotonic | grep -v "^-- "; ls -l /etc/sluice; cat /etc/sluice/backend.conf; ip -4 -o addr show scope global'
"""


def script(steps, enroll_timeout=300, setup=""):
    """The user-data script: the header, setup (shell), the wait for enrollment, the steps,
    DONE."""
    out = [HEADER, setup, WAIT_ENROLL.replace("{timeout}", str(enroll_timeout))]
    for name, cmd in steps:
        if name == "@signal":
            out.append(f"say {shlex.quote('@@ SIGNAL ' + cmd)}\n")
        else:
            out.append(f"step {shlex.quote(name)} {shlex.quote(cmd)}\n")
    out.append('say "@@ DONE"\n')
    return "".join(out)


def program(name, env=None):
    """A tests/cuda program from the programs disk, with environment variables."""
    pre = " ".join(f"{k}={shlex.quote(str(v))}" for k, v in (env or {}).items())
    return f"{pre + ' ' if pre else ''}{PROGS}/bin/{name}"


class Results:
    """The parsed serial output of the job: steps as {name: {rc, s, output}}, signals, done."""

    BEGIN = re.compile(r"^@@ BEGIN (\S+)$")
    END = re.compile(r"^@@ END (\S+) rc=(\d+) s=(\S+)$")

    def __init__(self):
        self.steps, self.order, self.signals = {}, [], []
        self.started = self.done = False
        self.fatal = None
        self.current = None

    def feed(self, line):
        """One line; returns ('begin'|'end'|'signal'|'done'|None, detail)."""
        if line.startswith("@@ JOB START"):
            self.started = True
            return "start", None
        if line.startswith("@@ FATAL"):
            self.fatal = line[9:]
            return "fatal", self.fatal
        if line == "@@ DONE":
            self.done = True
            return "done", None
        if line.startswith("@@ SIGNAL "):
            self.signals.append(line[10:])
            return "signal", line[10:]
        m = self.BEGIN.match(line)
        if m:
            self.current = m.group(1)
            self.steps[self.current] = {"rc": None, "s": None, "output": []}
            self.order.append(self.current)
            return "begin", self.current
        m = self.END.match(line)
        if m and m.group(1) in self.steps:
            st = self.steps[m.group(1)]
            st["rc"], st["s"] = int(m.group(2)), float(m.group(3))
            self.current = None
            return "end", m.group(1)
        if self.current:
            self.steps[self.current]["output"].append(line)
            return "output", self.current
        return None, None

    def output(self, name):
        st = self.steps.get(name)
        return "\n".join(st["output"]) if st else ""
