"""A tap for QEMU made with ioctls alone, for a machine without ip(8), bridges or namespaces
(the GPU machine: docs/vm-testing.md, "On the GPU machine").

  this machine's network namespace
    tap slvmtPID: HOST_IP/24, up (the backend and the floors server listen there)
    └─ its file descriptor, held here and passed to QEMU (-netdev tap,fd=N)
         the guest's virtio NIC: GUEST_IP/24 (static: the kernel's ip= argument)

The tap is made with TUNSETIFF on /dev/net/tun (IFF_TAP, IFF_NO_PI, IFF_VNET_HDR: QEMU then
hands the guest's large segments and checksums to the host's stack); its address, netmask and
IFF_UP are set with SIOCSIFADDR, SIOCSIFNETMASK and SIOCSIFFLAGS on an AF_INET socket. The tap is
not persistent: it goes away when the last descriptor closes (QEMU's and ours), so a run that
dies leaves nothing behind. Needs CAP_NET_ADMIN; every failure raises TapError naming the step.
"""
import errno
import fcntl
import os
import socket
import stat
import struct

TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
SIOCGIFFLAGS, SIOCSIFFLAGS = 0x8913, 0x8914
SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C
IFF_UP = 0x1
IFREQ_SIZE = 40  # struct ifreq on Linux, 64-bit: the name (16) and a union of 24 bytes


class TapError(Exception):
    """The tap could not be made or configured; the message says which step and why."""


def _ifreq(name, payload=b""):
    return struct.pack("16s", name.encode()) + payload.ljust(IFREQ_SIZE - 16, b"\0")


def _sockaddr_in(ip):
    # sa_family in the machine's byte order, the port (0) and the address in network order
    return struct.pack("=H", socket.AF_INET) + b"\0\0" + socket.inet_aton(ip)


def _why(ex):
    if ex.errno in (errno.EPERM, errno.EACCES):
        return f"{os.strerror(ex.errno)} (CAP_NET_ADMIN is needed)"
    return os.strerror(ex.errno) if ex.errno else str(ex)


class TapNetwork:
    """The tap, its host address and the guest's address; fd goes to QEMU."""

    def __init__(self, subnet="10.221.0", tag=None):
        tag = tag if tag is not None else os.getpid()
        self.tap = f"slvmt{tag % 10**8}"
        self.host_ip, self.guest_ip = f"{subnet}.1", f"{subnet}.2"
        self.netmask = "255.255.255.0"
        self.cidr = f"{subnet}.0/24"
        self.fd, self.note = None, ""

    def wrap(self, argv):
        """The host's processes run where they are: the tap is in this namespace."""
        return list(argv)

    def up(self):
        tun = self.tun_node()
        try:
            fd = os.open(tun, os.O_RDWR | os.O_CLOEXEC)
        except OSError as ex:
            raise TapError(f"cannot open /dev/net/tun: {_why(ex)}") from None
        try:
            req = _ifreq(self.tap, struct.pack("=H", IFF_TAP | IFF_NO_PI | IFF_VNET_HDR))
            fcntl.ioctl(fd, TUNSETIFF, req)
        except OSError as ex:
            os.close(fd)
            raise TapError(f"TUNSETIFF {self.tap} on /dev/net/tun: {_why(ex)}") from None
        self.fd = fd
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            for what, op, value in [("SIOCSIFADDR", SIOCSIFADDR, self.host_ip),
                                    ("SIOCSIFNETMASK", SIOCSIFNETMASK, self.netmask)]:
                try:
                    fcntl.ioctl(s.fileno(), op, _ifreq(self.tap, _sockaddr_in(value)))
                except OSError as ex:
                    self.down()
                    raise TapError(f"{what} {value} on {self.tap}: {_why(ex)}") from None
            try:
                got = fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, _ifreq(self.tap))
                flags = struct.unpack_from("=H", got, 16)[0] | IFF_UP
                fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, _ifreq(self.tap, struct.pack("=H", flags)))
            except OSError as ex:
                self.down()
                raise TapError(f"SIOCSIFFLAGS IFF_UP on {self.tap}: {_why(ex)}") from None

    def tun_node(self, dev="/dev/net/tun", sysfs="/sys/class/misc/tun/dev"):
        """/dev/net/tun; made (mknod) where the kernel has tun but /dev lacks the node, as a
        /dev that is not devtmpfs may."""
        self.note = ""
        if os.path.exists(dev):
            return dev
        try:
            with open(sysfs) as f:
                major, minor = (int(x) for x in f.read().strip().split(":"))
        except (OSError, ValueError):
            raise TapError(f"{dev} is missing and the kernel has no tun device ({sysfs}): no "
                           "tap can be made on this machine") from None
        try:
            os.makedirs(os.path.dirname(dev), exist_ok=True)
            os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(major, minor))
        except OSError as ex:
            raise TapError(f"{dev} is missing and cannot be made (mknod {major}:{minor}): "
                           f"{_why(ex)}") from None
        self.note = f"made {dev} ({major}:{minor}, from {sysfs})"
        return dev

    def qemu_fd(self):
        """The tap's descriptor, inheritable, for Popen(pass_fds=...) and -netdev tap,fd=N."""
        os.set_inheritable(self.fd, True)
        return self.fd

    def attach_tap(self):
        """Nothing to move: QEMU holds the tap from its start."""

    def down(self):
        if self.fd is not None:
            os.close(self.fd)  # the tap goes away with QEMU's descriptor
            self.fd = None
