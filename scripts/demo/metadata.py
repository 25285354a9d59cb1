"""A stand-in for Nova's metadata API, as a guest and nova-hook see it.

A real guest GETs http://169.254.169.254/openstack/latest/vendor_data2.json. Nova's metadata API
finds the instance by the request's source address (the Neutron port's fixed IP), then calls
every DynamicJSON target: a POST of the instance's ids, as nova/api/metadata/
vendordata_dynamic.py sends it, over TLS with Nova's client certificate
([vendordata_dynamic_auth] certfile/keyfile), and answers {"TARGET": <the target's JSON>, ...}.
This class does the same for one target, "sluice" = sluice-novahook. It listens on
127.0.0.1:PORT instead of 169.254.169.254:80 (the demo does not add addresses to the host) and,
like Nova without its 15 s cache, asks nova-hook again for every GET.
"""
import http.client
import http.server
import json
import ssl
import threading

VENDORDATA_PATH = "/openstack/latest/vendor_data2.json"


class MetadataService:
    def __init__(self, novahook_port, pki, instances):
        """instances: {source address: (instance uuid, project id, hostname)}."""
        self.novahook_port, self.instances, self.calls = novahook_port, instances, []
        self.ctx = ssl.create_default_context(cafile=pki["server_ca"])
        self.ctx.load_cert_chain(pki["nova"][1], pki["nova"][0])  # Nova's client certificate
        service = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                code, body = service.answer(self.path, self.client_address[0])
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}{VENDORDATA_PATH}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def vendordata_post(self, instance, project, hostname):
        """Nova's DynamicJSON call: (HTTP status, parsed JSON answer)."""
        body = json.dumps({"project-id": project, "instance-id": instance,
                           "image-id": "00000000-0000-4000-8000-000000000000",
                           "user-data": None, "hostname": hostname, "metadata": {},
                           "boot-roles": "member,reader"})
        conn = http.client.HTTPSConnection("127.0.0.1", self.novahook_port, context=self.ctx,
                                           timeout=5)
        try:
            conn.request("POST", "/v1/vendordata", body=body,
                         headers={"Content-Type": "application/json",
                                  "Accept": "application/json",
                                  "User-Agent": "openstack-nova-vendordata"})
            r = conn.getresponse()
            return r.status, json.loads(r.read() or b"{}")
        finally:
            conn.close()

    def answer(self, path, source):
        if path != VENDORDATA_PATH:
            return 404, {}
        if source not in self.instances:
            return 404, {}
        instance, project, hostname = self.instances[source]
        try:
            status, data = self.vendordata_post(instance, project, hostname)
        except (OSError, ValueError) as ex:
            status, data = 0, {"error": str(ex)}
        self.calls.append((source, instance, status, data))
        # Nova leaves out a target that failed (and logs it); the guest then finds no entry.
        return 200, ({"sluice": data} if status == 200 else {})

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
