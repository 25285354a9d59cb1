#!/usr/bin/env python3
"""The OpenStack artifacts of nova-hook/openstack/:
  provider  provider.yaml.j2, rendered, checked against Nova's documented provider config schema
            (doc/source/admin/managing-resource-providers.rst, nova/compute/provider_config.py
            schema 1.0), and the checker itself shown to reject broken files;
  flavors   bootstrap-flavors.sh --dry-run emits only namespaced extra specs, refuses bad tiers;
  novaconf  nova.conf.fragment parses and sets the options vendordata needs.
usage: test_artifacts.py provider|flavors|novaconf OPENSTACK_DIR"""
import configparser
import copy
import re
import subprocess
import sys

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


# ------------------------------------------------------------------ provider.yaml schema 1.0

SCHEMA_VERSION = re.compile(r"^1\.([0-9]|[1-9][0-9]+)$")
UUID = re.compile(r"^([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                  r"[0-9a-fA-F]{12}|\$COMPUTE_NODE)$")
CUSTOM_RC = re.compile(r"^CUSTOM_[A-Z0-9_]+$")
TRAIT = re.compile(r"^[A-Z0-9_]{1,255}$")
INV_INT_MIN = {"total": 1, "reserved": 0, "min_unit": 1, "max_unit": 1, "step_size": 1}


def schema_errors(doc):
    """Nova's rules for a provider config file, as documented; returns a list of errors."""
    err = []
    if not isinstance(doc, dict):
        return ["top level is not a mapping"]
    meta = doc.get("meta")
    if not isinstance(meta, dict) or not isinstance(meta.get("schema_version"), str) or \
            not SCHEMA_VERSION.match(meta["schema_version"]):
        err.append("meta.schema_version missing or not matching ^1\\.([0-9]|[1-9][0-9]+)$")
    provs = doc.get("providers")
    if not isinstance(provs, list) or not provs:
        return err + ["providers is not a non-empty list"]
    for i, p in enumerate(provs):
        where = f"providers[{i}]"
        if not isinstance(p, dict):
            err.append(f"{where} is not a mapping")
            continue
        extra = set(p) - {"identification", "inventories", "traits"}
        if extra:
            err.append(f"{where}: unknown keys {sorted(extra)}")
        ident = p.get("identification")
        if not isinstance(ident, dict) or len(ident) != 1 or set(ident) - {"uuid", "name"}:
            err.append(f"{where}.identification: exactly one of uuid or name")
        elif "uuid" in ident and not (isinstance(ident["uuid"], str) and
                                      UUID.match(ident["uuid"])):
            err.append(f"{where}.identification.uuid: not a UUID or $COMPUTE_NODE")
        elif "name" in ident and not (isinstance(ident["name"], str) and
                                      0 < len(ident["name"]) <= 200):
            err.append(f"{where}.identification.name: 1..200 characters")
        inv = p.get("inventories")
        if inv is not None:
            if not isinstance(inv, dict) or set(inv) != {"additional"} or \
                    not isinstance(inv["additional"], list):
                err.append(f"{where}.inventories: only an 'additional' list")
            else:
                for j, item in enumerate(inv["additional"]):
                    w = f"{where}.inventories.additional[{j}]"
                    if not isinstance(item, dict) or not item:
                        err.append(f"{w}: not a mapping of resource classes")
                        continue
                    for rc, spec in item.items():
                        if not CUSTOM_RC.match(str(rc)):
                            err.append(f"{w}: {rc} is not a CUSTOM_* resource class")
                        if not isinstance(spec, dict) or "total" not in spec:
                            err.append(f"{w}.{rc}: total is required")
                            continue
                        for k, v in spec.items():
                            if k in INV_INT_MIN:
                                if not isinstance(v, int) or isinstance(v, bool) or \
                                        v < INV_INT_MIN[k]:
                                    err.append(f"{w}.{rc}.{k}: integer >= {INV_INT_MIN[k]}")
                            elif k == "allocation_ratio":
                                if not isinstance(v, (int, float)) or isinstance(v, bool) or \
                                        v < 0:
                                    err.append(f"{w}.{rc}.allocation_ratio: number >= 0")
                            else:
                                err.append(f"{w}.{rc}: unknown key {k}")
        traits = p.get("traits")
        if traits is not None:
            if not isinstance(traits, dict) or set(traits) != {"additional"} or \
                    not isinstance(traits["additional"], list):
                err.append(f"{where}.traits: only an 'additional' list")
            else:
                for t in traits["additional"]:
                    if not isinstance(t, str) or not TRAIT.match(t):
                        err.append(f"{where}.traits: {t!r} not matching ^[A-Z0-9_]{{1,255}}$")
                    elif not t.startswith("CUSTOM_"):
                        err.append(f"{where}.traits: {t} is not a custom trait")
    return err


def render(text, values):
    out = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: str(values[m.group(1)]), text)
    return out


def test_provider(d):
    import yaml  # Debian python3-yaml (scripts/install-deps)
    text = open(f"{d}/provider.yaml.j2").read()
    values = {"sluice_gpu_slots": 8, "sluice_gpu_slots_reserved": 0,
              "nova_provider_config_dir": "/etc/nova/provider_config"}
    rendered = render(text, values)
    check("{{" not in rendered, "every template variable rendered")
    doc = yaml.safe_load(rendered)
    errs = schema_errors(doc)
    check(not errs, f"provider.yaml matches Nova's schema {errs}")
    prov = doc["providers"][0]
    inv = prov["inventories"]["additional"][0]["CUSTOM_GPU_REMOTE_SLOT"]
    check(inv["total"] == 8 and inv["max_unit"] == 1, "CUSTOM_GPU_REMOTE_SLOT total 8, max 1")
    check(prov["traits"]["additional"] == ["CUSTOM_GPU_REMOTING"], "trait CUSTOM_GPU_REMOTING")
    check(prov["identification"] == {"uuid": "$COMPUTE_NODE"}, "identification $COMPUTE_NODE")
    # the checker rejects what Nova rejects
    broken = [
        ("schema_version 2.0", lambda x: x["meta"].update(schema_version="2.0")),
        ("schema_version 1.01", lambda x: x["meta"].update(schema_version="1.01")),
        ("uuid and name", lambda x: x["providers"][0]["identification"].update(name="n")),
        ("no identification", lambda x: x["providers"][0].pop("identification")),
        ("standard RC", lambda x: x["providers"][0]["inventories"]["additional"].append(
            {"VGPU": {"total": 1}})),
        ("no total", lambda x: x["providers"][0]["inventories"]["additional"][0][
            "CUSTOM_GPU_REMOTE_SLOT"].pop("total")),
        ("lower-case trait", lambda x: x["providers"][0]["traits"]["additional"].append(
            "custom_x")),
        ("standard trait", lambda x: x["providers"][0]["traits"]["additional"].append(
            "HW_CPU_X86_AVX")),
        ("total 0", lambda x: x["providers"][0]["inventories"]["additional"][0][
            "CUSTOM_GPU_REMOTE_SLOT"].update(total=0)),
    ]
    for what, mutate in broken:
        b = copy.deepcopy(doc)
        mutate(b)
        check(schema_errors(b), f"checker rejects: {what}")
    check(schema_errors(yaml.safe_load(render(text, dict(values, sluice_gpu_slots="eight")))),
          "checker rejects a non-integer total")


def test_flavors(d):
    script = f"{d}/bootstrap-flavors.sh"
    r = subprocess.run([script, "--dry-run", "--tiers", "bronze,silver,gold", "--prefix", "gpu"],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"--dry-run exits 0 ({r.stderr.strip()})")
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    check(len(lines) == 3 and all(l.startswith("openstack flavor create ") for l in lines),
          "one openstack flavor create per tier")
    keys = []
    for l in lines:
        words = l.split()
        keys += [words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--property"]
    names = {k for k, _ in keys}
    check(all(":" in k for k in names), f"only namespaced keys: {sorted(names)}")
    check(all(k.split(":")[0] in {"resources", "trait", "sluice"} for k in names),
          "namespaces resources, trait, sluice only")
    check(["resources:CUSTOM_GPU_REMOTE_SLOT", "1"] in keys, "resources:CUSTOM_GPU_REMOTE_SLOT=1")
    check(["trait:CUSTOM_GPU_REMOTING", "required"] in keys, "trait:CUSTOM_GPU_REMOTING=required")
    check(sorted(v for k, v in keys if k == "sluice:sla") == ["bronze", "gold", "silver"],
          "sluice:sla=<tier> per flavor")
    check(any(l.endswith("gpu.gold ") or l.endswith("gpu.gold") for l in lines), "name PREFIX.TIER")
    for bad in ["Gold", "gold;rm", "", "a b", "x" * 40, "gold,,silver"]:
        r = subprocess.run([script, "--dry-run", "--tiers", bad], capture_output=True, text=True)
        check(r.returncode != 0 and r.stdout == "", f"tier {bad!r} refused, nothing printed")
    r = subprocess.run([script, "--dry-run", "--ram", "lots"], capture_output=True, text=True)
    check(r.returncode != 0, "--ram lots refused")


def test_novaconf(d):
    c = configparser.ConfigParser(inline_comment_prefixes=None)
    c.read(f"{d}/nova.conf.fragment")
    api = c["api"]
    check("DynamicJSON" in api["vendordata_providers"].split(","), "DynamicJSON provider enabled")
    check(re.match(r"^sluice@https://[^/]+/\S+$", api["vendordata_dynamic_targets"]) is not None,
          "target sluice@https://...")
    check(int(api["vendordata_dynamic_connect_timeout"]) >= 3, "connect timeout >= 3 (Nova min)")
    check(api["vendordata_dynamic_failure_fatal"] == "False", "failure not fatal")
    auth = c["vendordata_dynamic_auth"]
    check("certfile" in auth and "keyfile" in auth, "mTLS certfile/keyfile set")
    check("auth_type" not in auth, "Keystone alternative documented, not enabled")
    # Nova passes verify=vendordata_dynamic_ssl_certfile on the request, which overrides the
    # session's cafile: the CA belongs in [api], and a cafile would mislead
    check(api.get("vendordata_dynamic_ssl_certfile", "").endswith(".pem"),
          "the server CA is [api] vendordata_dynamic_ssl_certfile")
    check("cafile" not in auth, "no [vendordata_dynamic_auth] cafile (it has no effect)")


if __name__ == "__main__":
    {"provider": test_provider, "flavors": test_flavors, "novaconf": test_novaconf}[sys.argv[1]](
        sys.argv[2])
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
    sys.exit(1 if FAILS else 0)
