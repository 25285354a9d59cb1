#!/usr/bin/python3
"""Nova's own code, from Debian's python3-nova (Zed), producing what Nova gives a GPU instance:

  domain       the libvirt domain XML: nova.virt.libvirt.config's guest classes, its <metadata>
               from LibvirtDriver._get_guest_config_meta (what nova-compute writes)
  set-meta     rewrites the running domain's <nova:instance> (another flavor) with the libvirt
               driver's Guest.set_metadata, as Nova does on a live change (python3-libvirt)
  config-drive a config drive: nova.virt.configdrive.ConfigDriveBuilder over
               nova.api.metadata.base.InstanceMetadata; its vendor_data2.json comes from
               sluice-novahook through Nova's DynamicJSON client (vendordata_dynamic.py)
  metadata     a metadata service: InstanceMetadata(...).lookup(path) for GETs, by the source
               address of the request, as nova-api-metadata answers behind Neutron's proxy

Run with Debian's /usr/bin/python3 (python3-nova lives there). SPEC is a JSON file written by
tests/vm/vm_test.py (see spec keys below). Outside a cloud, two lookups have no service to ask
and are replaced here, as Nova's own unit tests replace them: the instance's block device
mappings (Nova's database) are empty, its security groups (Neutron) are ["default"].
Everything else is Nova's code unchanged.
"""
import argparse
import base64
import http.server
import json
import os
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True

from oslo_utils import timeutils  # noqa: E402

import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402
from nova.api.metadata import base as md_base  # noqa: E402
from nova.network import model as netmodel  # noqa: E402
from nova.network import security_group_api  # noqa: E402
from nova.privsep import utils as privsep_utils  # noqa: E402
from nova.virt import configdrive  # noqa: E402
from nova.virt.libvirt import config as vconfig  # noqa: E402
from nova.virt.libvirt import driver as libvirt_driver  # noqa: E402

CONF = nova.conf.CONF


def setup(spec, work, vendordata=True):
    """nova.conf as a compute node (config drive) and nova-api-metadata would have it for the
    DynamicJSON target "sluice" (none with vendordata False); the two stand-ins for services
    this test has not got."""
    conf = os.path.join(work, "nova.conf")
    with open(conf, "w") as f:
        f.write("[DEFAULT]\nmkisofs_cmd = genisoimage\n")
        if vendordata:
            vd = spec["vendordata"]
            f.write(f"""[api]
vendordata_providers = StaticJSON,DynamicJSON
vendordata_dynamic_targets = sluice@{vd['url']}
vendordata_dynamic_ssl_certfile = {vd['server_ca']}
vendordata_dynamic_connect_timeout = 5
vendordata_dynamic_read_timeout = 5
[vendordata_dynamic_auth]
certfile = {vd['cert']}
keyfile = {vd['key']}
""")
    # only this file: not /etc/nova/nova.conf(.d) of the machine
    CONF([], project="nova", default_config_files=[conf], default_config_dirs=[])
    objects.register_all()
    security_group_api.get_instance_security_groups = (
        lambda ctxt, instance, detailed=False: [{"name": "default"}])
    objects.Instance.get_bdms = lambda self: objects.BlockDeviceMappingList(objects=[])


def network_info(spec):
    p = spec["port"]
    ip = netmodel.FixedIP(address=p["ip"], version=4, type="fixed")
    subnet = netmodel.Subnet(cidr=p["cidr"], ips=[ip], dns=[], routes=[],
                             gateway=netmodel.IP(address=p["gateway"], type="gateway"),
                             dhcp_server=p["gateway"])
    network = netmodel.Network(id=p["network_id"], bridge=None, label="sluice-gpu",
                               subnets=[subnet],
                               meta={"injected": False, "tenant_id": spec["project_id"],
                                     "mtu": 1500})
    vif = netmodel.VIF(id=p["id"], address=p["mac"], network=network,
                       type=netmodel.VIF_TYPE_TAP, devname=p.get("tap"), vnic_type="normal",
                       active=True)
    return netmodel.NetworkInfo([vif])


def instance(spec, flavor=None):
    ctxt = nova_context.get_admin_context()
    fl = dict(spec["flavor"], **(flavor or {}))
    user_data = spec.get("user_data")
    inst = objects.Instance(
        context=ctxt, id=1, uuid=spec["uuid"], user_id=spec["user_id"],
        project_id=spec["project_id"], display_name=spec["name"], hostname=spec["hostname"],
        image_ref=spec["image_ref"], kernel_id=None, ramdisk_id=None, key_name=None,
        key_data=None, host=spec.get("host", "sluice-vm-host"), launch_index=0,
        reservation_id="r-sluicevm", vcpus=fl["vcpus"], memory_mb=fl["memory_mb"],
        root_gb=fl["root_gb"], ephemeral_gb=0, root_device_name="/dev/vda",
        default_ephemeral_device=None, default_swap_device=None, metadata={},
        system_metadata={"owner_project_name": spec["project_name"],
                         "owner_user_name": spec["user_name"], "boot_roles": "member,reader"},
        user_data=(base64.b64encode(user_data.encode()).decode() if user_data else None),
        availability_zone="nova", launched_at=None, config_drive=bool(spec.get("config_drive")),
        device_metadata=None, numa_topology=None, security_groups=objects.SecurityGroupList(),
        ec2_ids=objects.EC2Ids(instance_id="i-00000001", ami_id="ami-00000001",
                               kernel_id=None, ramdisk_id=None),
        keypairs=objects.KeyPairList(objects=[]))
    inst.flavor = objects.Flavor(name=fl["name"], flavorid=fl["name"], memory_mb=fl["memory_mb"],
                                 vcpus=fl["vcpus"], root_gb=fl["root_gb"], ephemeral_gb=0, swap=0,
                                 extra_specs=fl.get("extra_specs", {}))
    inst.info_cache = objects.InstanceInfoCache(context=ctxt, instance_uuid=inst.uuid,
                                                network_info=network_info(spec))
    return inst


def nova_meta(spec, flavor=None):
    """The <nova:instance> element, by the libvirt driver's own method."""
    inst = instance(spec, flavor)
    return libvirt_driver.LibvirtDriver._get_guest_config_meta(None, inst,
                                                               inst.info_cache.network_info)


def disk(path, dev, bus, device_type="disk", readonly=False):
    d = vconfig.LibvirtConfigGuestDisk()
    d.source_type, d.source_path = "file", path
    # LibvirtDriver.disk_cachemode: "none" where the instances folder takes O_DIRECT
    cache = "none" if privsep_utils.supports_direct_io(os.path.dirname(path)) else "writeback"
    d.driver_name, d.driver_format, d.driver_cache = "qemu", "raw", cache
    d.source_device, d.target_dev, d.target_bus = device_type, dev, bus
    d.readonly = readonly
    return d


def serial(path, port):
    s = vconfig.LibvirtConfigGuestSerial()
    s.type, s.source_path, s.target_port = "file", path, port
    return s


def domain(spec):
    """The guest as Nova's libvirt driver describes a QEMU (TCG) instance with direct kernel
    boot (image properties kernel_id/ramdisk_id), a config drive on IDE (i440fx), a tap
    interface and the console in a file."""
    b = spec["boot"]
    inst = instance(spec)
    g = vconfig.LibvirtConfigGuest()
    g.virt_type = "qemu"
    g.name, g.uuid = spec["domain"], spec["uuid"]
    g.memory = spec["flavor"]["memory_mb"] * 1024
    g.vcpus = spec["flavor"]["vcpus"]
    g.os_type, g.os_mach_type = "hvm", "pc"
    g.os_kernel, g.os_initrd, g.os_cmdline = b["kernel"], b["initrd"], b["cmdline"]
    g.metadata.append(libvirt_driver.LibvirtDriver._get_guest_config_meta(
        None, inst, inst.info_cache.network_info))
    g.features = [vconfig.LibvirtConfigGuestFeatureACPI(), vconfig.LibvirtConfigGuestFeatureAPIC()]
    clock = vconfig.LibvirtConfigGuestClock()
    clock.offset = "utc"
    g.clock = clock
    g.add_device(disk(b["disk"], "vda", "virtio"))
    for i, extra in enumerate(b.get("extra_disks", [])):
        g.add_device(disk(extra, "vd" + chr(ord("b") + i), "virtio", readonly=True))
    if b.get("config_drive"):
        g.add_device(disk(b["config_drive"], "hdd", "ide", "cdrom", readonly=True))
    nic = vconfig.LibvirtConfigGuestInterface()
    nic.net_type, nic.target_dev = "ethernet", spec["port"]["tap"]
    nic.mac_addr, nic.model = spec["port"]["mac"], "virtio"
    g.add_device(nic)
    g.add_device(serial(b["console_log"], 0))
    if b.get("results_log"):
        g.add_device(serial(b["results_log"], 1))
    xml = g.to_xml()
    # The tap is made by the test beforehand (libvirt must not create or delete it).
    return xml.replace(f'<target dev="{spec["port"]["tap"]}"/>',
                       f'<target dev="{spec["port"]["tap"]}" managed="no"/>', 1)


def set_meta(spec, flavor, uri="qemu:///system"):
    """nova.virt.libvirt.guest.Guest.set_metadata on the live and persistent domain."""
    import libvirt
    from nova.virt.libvirt import guest as libvirt_guest
    conn = libvirt.open(uri)
    try:
        dom = conn.lookupByUUIDString(spec["uuid"])
        libvirt_guest.Guest(dom).set_metadata(nova_meta(spec, {"name": flavor}), persistent=True,
                                              live=True)
    finally:
        conn.close()


def metadata_object(spec):
    inst = instance(spec)
    return md_base.InstanceMetadata(inst, address=spec["port"]["ip"],
                                    network_info=inst.info_cache.network_info)


def config_drive(spec, path):
    md = metadata_object(spec)
    with configdrive.ConfigDriveBuilder(instance_md=md) as cdb:
        cdb.make_drive(path)


class Metadata:
    """nova-api-metadata for the instances of SPECs, by source address (Neutron's proxy tells
    Nova the instance; here the tap's only guest is the instance). Nova caches an instance's
    InstanceMetadata for [api] metadata_cache_expiration (15 s); the test wants a fresh token
    on every request, so it builds one per request (expiration 0)."""

    def __init__(self, specs, listen, log):
        self.by_ip = {s["port"]["ip"]: s for s in specs}
        self.log = log
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                code, ctype, body = service.answer(self.client_address[0], self.path)
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, fmt, *args):
                service.log(f"{self.client_address[0]} {fmt % args}")

        host, port = listen.rsplit(":", 1)
        self.httpd = http.server.ThreadingHTTPServer((host, int(port)), Handler)

    def answer(self, source, path):
        spec = self.by_ip.get(source)
        if spec is None:
            return 404, "text/plain", f"no instance has the address {source}\n".encode()
        md = metadata_object(spec)
        try:
            data = md.lookup(path.split("?")[0])
        except md_base.InvalidMetadataPath:
            return 404, "text/plain", b"not found\n"
        if isinstance(data, list):
            data = "\n".join(data)
        if isinstance(data, str):
            data = data.encode()
        return 200, md.get_mimetype(), data


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["domain", "nova-meta", "set-meta", "config-drive",
                                     "metadata"])
    ap.add_argument("spec", nargs="+", help="instance spec JSON file(s); one except metadata")
    ap.add_argument("--out", help="config-drive: the image file; others: stdout")
    ap.add_argument("--flavor", help="nova-meta, set-meta: another flavor name")
    ap.add_argument("--listen", default="169.254.169.254:80", help="metadata: ADDR:PORT")
    ap.add_argument("--no-vendordata", action="store_true",
                    help="no DynamicJSON target (a config drive with user-data only)")
    args = ap.parse_args()
    specs = []
    for p in args.spec:
        with open(p) as f:
            specs.append(json.load(f))
    work = tempfile.mkdtemp(prefix="nova-side.")
    setup(specs[0], work, vendordata=not args.no_vendordata)
    if args.what == "domain":
        out = domain(specs[0])
    elif args.what == "nova-meta":
        out = nova_meta(specs[0], {"name": args.flavor} if args.flavor else None).to_xml()
    elif args.what == "set-meta":
        set_meta(specs[0], args.flavor or specs[0]["flavor"]["name"])
        print(f"nova-side: Guest.set_metadata: flavor {args.flavor} on {specs[0]['domain']}")
        return 0
    elif args.what == "config-drive":
        t0 = time.time()
        config_drive(specs[0], args.out)
        print(f"nova-side: config drive {args.out} built by Nova's ConfigDriveBuilder in "
              f"{time.time() - t0:.1f} s", flush=True)
        return 0
    else:
        def log(line):
            print(f"nova-side metadata: {timeutils.utcnow().isoformat()} {line}", flush=True)
        m = Metadata(specs, args.listen, log)
        log(f"listening on http://{args.listen} for {', '.join(m.by_ip)}")
        m.httpd.serve_forever()
        return 0
    sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
