#!/usr/bin/env python3
"""A real gRPC client and server (python3-grpcio) under service configs that `retryfreeze export --to grpc` wrote.

Reads a JSON array of cases on stdin (one process per case when each must start with a full retry throttle: grpc-core
keeps one per server name for the whole process): {"config": <service config JSON text>, "method": "/pkg.Svc/Method",
"status": "UNAVAILABLE" (the status the server answers; "OK" for a success)}. Starts one server on a free loopback
port whose generic handler answers every method with the case's status and counts the calls it receives, and for
each case opens a channel with options grpc.service_config = the config and grpc.enable_retries = 1, makes one call
and records what the client saw. Prints a JSON array, one result per case: {"calls": n (the attempts the server
counted), "code": the status name the client got, "details": its message}; a config grpcio refuses gives code
INVALID_ARGUMENT, details "errors validating service config…" and no call. No protoc: requests and responses are raw bytes. Every call has a 5 s deadline, so a run is bounded.
"""
import json
import os
import sys
import threading
from concurrent import futures

import grpc


class Handler(grpc.GenericRpcHandler):
    """Answers every unary method with the current case's status and counts the calls per method."""

    def __init__(self):
        self.lock = threading.Lock()
        self.calls = 0
        self.status = grpc.StatusCode.OK
        self.headers_first = False

    def service(self, handler_call_details):
        def unary(request, context):
            with self.lock:
                self.calls += 1
                status = self.status
            if self.headers_first:  # the response head goes alone: the status then travels in a trailer
                context.send_initial_metadata((("x-retryfreeze", "head"),))
            if status != grpc.StatusCode.OK:
                context.abort(status, "retryfreeze grpc check")
            return request

        return grpc.unary_unary_rpc_method_handler(unary, request_deserializer=None, response_serializer=None)


def run_case(port, handler, case):
    handler.status = grpc.StatusCode[case["status"]]
    handler.calls = 0
    channel = grpc.insecure_channel(
        "127.0.0.1:%d" % port,
        options=[("grpc.service_config", case["config"]), ("grpc.enable_retries", 1)],
    )
    try:
        call = channel.unary_unary(case["method"], request_serializer=None, response_deserializer=None)
        try:
            call(b"x", timeout=5)
            return {"calls": handler.calls, "code": "OK", "details": ""}
        except grpc.RpcError as e:
            # a channel whose service config grpcio refused fails its calls at once with INVALID_ARGUMENT, "errors
            # validating service config", and the server counts none
            return {"calls": handler.calls, "code": e.code().name, "details": e.details() or ""}
    finally:
        channel.close()


def serve(status, port_file):
    """Serves every method with status until standard input ends, then prints the calls it counted."""
    handler = Handler()
    handler.headers_first = status.startswith("TRAILER_")
    handler.status = grpc.StatusCode[status[len("TRAILER_"):] if handler.headers_first else status]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % port)
    os.rename(port_file + ".tmp", port_file)  # whole, for a reader that polls it
    try:
        sys.stdin.read()
    finally:
        server.stop(None)
    print(json.dumps({"calls": handler.calls}))


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        return serve(sys.argv[2], sys.argv[3])
    cases = json.load(sys.stdin)
    handler = Handler()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[handler])
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        print(json.dumps([run_case(port, handler, c) for c in cases]))
    finally:
        server.stop(None)


if __name__ == "__main__":
    main()
