#!/usr/bin/env python3
"""The scheduler's CPU per API request on each transport (issue 20: the bind path was 36% of its CPU).

A local TLS server in its own process answers every request at once as the apiserver answers a bind (201, a small
Status, the apiserver's headers); the client sends N binds from T threads and reports requests/s and its own CPU
(process time) per request:

    official   `Kube` over the official client's urllib3 pool (what every call used before)
    http1      `Kube` over scheduler/cache/http1.py (what it uses now)
    stdlib     http.client, one kept-alive connection per thread (for comparison: no header parsing of ours)

    .venv/bin/python bench/bench_transport.py [--requests 6000] [--threads 16] [--rounds 2]

Needs `openssl` for the server's certificate.
"""

from __future__ import annotations

import argparse
import http.client
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

SERVER = r'''
import asyncio, ssl, sys
BODY = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}'
RESP = (b"HTTP/1.1 201 Created\r\nAudit-Id: 0d7c3b4e-8d9a-4c6e-9f0e-5a1b2c3d4e5f\r\n"
        b"Cache-Control: no-cache, private\r\nContent-Type: application/json\r\n"
        b"X-Kubernetes-Pf-Flowschema-Uid: 1\r\nX-Kubernetes-Pf-Prioritylevel-Uid: 2\r\n"
        b"Date: Wed, 02 Dec 2026 00:00:00 GMT\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY)
async def handle(r, w):
    try:
        while True:
            head = await r.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            n = next((int(l.split(b":")[1]) for l in lines if l.lower().startswith(b"content-length:")), 0)
            if n:
                await r.readexactly(n)
            w.write(RESP)
            await w.drain()
    except Exception:
        w.close()
async def main():
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(sys.argv[1], sys.argv[2])
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=ctx)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()
asyncio.run(main())
'''


def binding(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": f"p{i}", "namespace": "ns", "uid": "8d9a-4c6e-9f0e-5a1b2c3d4e5f"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=6000)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)

    from kubernetes import client

    from scheduler.cache.kube import Kube, dumps

    work = Path(tempfile.mkdtemp(prefix="bench-transport-"))
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(cert), str(key)], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())  # type: ignore[union-attr]

        def kube(lean: bool) -> Kube:
            cfg = client.Configuration()
            cfg.host, cfg.ssl_ca_cert = f"https://127.0.0.1:{port}", str(cert)
            cfg.api_key, cfg.api_key_prefix = {"BearerToken": "t"}, {"BearerToken": "Bearer"}
            cfg.connection_pool_maxsize = args.threads
            k = Kube(client.ApiClient(cfg))
            if not lean:
                k._http1 = None
            return k

        local = threading.local()
        context = ssl.create_default_context(cafile=str(cert))

        def stdlib(i: int) -> None:
            conn = getattr(local, "conn", None)
            if conn is None:
                conn = local.conn = http.client.HTTPSConnection("127.0.0.1", port, context=context)
            conn.request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", body=dumps(binding(i)),
                         headers={"Content-Type": "application/json", "Accept": "application/json",
                                  "Authorization": "Bearer t"})
            conn.getresponse().read()

        official, lean = kube(False), kube(True)
        senders = {
            "official": lambda i: official.request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", body=binding(i)),
            "http1": lambda i: lean.request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", body=binding(i)),
            "stdlib": stdlib,
        }
        print(f"{args.requests} binds from {args.threads} threads, {args.rounds} rounds")
        for r in range(args.rounds):
            for name, send in senders.items():
                with ThreadPoolExecutor(args.threads) as pool:
                    list(pool.map(send, range(200)))  # connections up, caches warm
                    t0, c0 = time.perf_counter(), time.process_time()
                    list(pool.map(send, range(args.requests)))
                    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                print(f"round {r + 1} {name:9s} {args.requests / wall:7.0f} requests/s  "
                      f"client CPU {cpu / args.requests * 1e6:5.0f} us/request", flush=True)
    finally:
        server.terminate()
        server.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
