"""A Python client of the proving daemon and a small CLI (``python -m cuzk_jax client {submit,wait,status,...}``).

::

    from cuzk_jax.service.client import Client

    with Client("unix:/home/me/.cache/cuzk_jax/service/cuzk.sock") as c:
        c.submit("sector-17", "porep_like", "tiny", sample=(17, 2))      # or inputs=[{...}, ...]
        job = c.wait("sector-17", timeout_s=600)                           # JobReply: state, proof, public inputs
        proofs, publics = c.result(job)                                    # Proof objects, int lists

``Client(address, token=None, tls_ca=None)``: ``token`` is sent as ``authorization: Bearer <token>``; a TLS
address needs ``tls_ca`` (the PEM of the CA or self-signed certificate to trust). gRPC errors arrive as
``grpc.RpcError`` (``.code()``, ``.details()``).

CLI exit status: 0 ok (``wait``: the job is done); 1 the job failed or was cancelled; 2 bad usage or a refused call
(one ``error: <STATUS>: <message>`` line); 3 ``wait`` timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import grpc

from . import proving_pb2 as pb
from . import proving_pb2_grpc as pbg
from .config import DEFAULT_ADDRESS, parse_address


class Client:
    """Thin wrapper over the generated stub (see the module docstring); usable as a context manager."""

    def __init__(self, address: str = DEFAULT_ADDRESS, *, token: str | None = None, tls_ca: str | None = None,
                 max_message_bytes: int = 256 << 20):
        kind, where = parse_address(address)
        target = "unix:" + os.path.abspath(where) if kind == "unix" else where
        options = [("grpc.max_receive_message_length", max_message_bytes)]
        if tls_ca:
            with open(tls_ca, "rb") as fh:
                creds = grpc.ssl_channel_credentials(root_certificates=fh.read())
            self.channel = grpc.secure_channel(target, creds, options=options)
        else:
            self.channel = grpc.insecure_channel(target, options=options)
        self.stub = pbg.ProverStub(self.channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.channel.close()

    def _kw(self, timeout):
        return {"metadata": self._metadata, "timeout": timeout}

    def submit(self, job_id: str, circuit: str, preset: str = "", *, priority: str = "", inputs=None,
               input_path: str | None = None, sample: tuple[int, int] | None = None,
               timeout: float | None = 60) -> pb.SubmitReply:
        """Submit a job; exactly one of ``inputs`` (list of per-partition dicts, or their JSON text),
        ``input_path`` (a file under the server's input_dir) or ``sample`` ``(seed, partitions)``."""
        req = pb.SubmitRequest(job_id=job_id, circuit=circuit, preset=preset, priority=priority)
        if inputs is not None:
            req.inputs_json = inputs if isinstance(inputs, str) else json.dumps(inputs)
        elif input_path is not None:
            req.input_path = input_path
        elif sample is not None:
            req.sample.seed, req.sample.partitions = int(sample[0]), int(sample[1])
        return self.stub.Submit(req, **self._kw(timeout))

    def wait(self, job_id: str, timeout_s: float = 0, rpc_timeout: float | None = None) -> pb.JobReply:
        """Await the job (``timeout_s`` 0: the server's maximum); ``timed_out`` is set if it is still queued."""
        rpc = rpc_timeout if rpc_timeout is not None else (timeout_s + 30 if timeout_s > 0 else None)
        return self.stub.Await(pb.AwaitRequest(job_id=job_id, timeout_s=timeout_s), **self._kw(rpc))

    def poll(self, job_id: str, timeout: float | None = 60) -> pb.JobReply:
        return self.stub.Poll(pb.JobRef(job_id=job_id), **self._kw(timeout))

    def cancel(self, job_id: str, timeout: float | None = 60) -> pb.CancelReply:
        return self.stub.Cancel(pb.JobRef(job_id=job_id), **self._kw(timeout))

    def status(self, timeout: float | None = 60) -> dict:
        return json.loads(self.stub.Status(pb.StatusRequest(), **self._kw(timeout)).json)

    def preload(self, circuit: str, preset: str = "", timeout: float | None = None) -> pb.KeyReply:
        return self.stub.Preload(pb.KeyRequest(circuit=circuit, preset=preset), **self._kw(timeout))

    def evict(self, circuit: str, preset: str = "", timeout: float | None = 60) -> pb.KeyReply:
        return self.stub.Evict(pb.KeyRequest(circuit=circuit, preset=preset), **self._kw(timeout))

    def pause(self, paused: bool = True, timeout: float | None = 60) -> pb.PauseReply:
        """Stop (``paused=True``) or restart (``False``) the forming of new batches on the server."""
        return self.stub.Pause(pb.PauseRequest(paused=paused), **self._kw(timeout))

    def resume(self, timeout: float | None = 60) -> pb.PauseReply:
        return self.pause(False, timeout)

    def metrics(self, timeout: float | None = 60) -> str:
        return self.stub.Metrics(pb.MetricsRequest(), **self._kw(timeout)).text

    @staticmethod
    def result(job: pb.JobReply) -> tuple[list, list]:
        """``(proofs, public inputs)`` of a done job: :class:`~cuzk_jax.groth16.data_structures.Proof` objects and
        per-partition lists of ints."""
        from cuzk_jax.groth16.data_structures import proofs_from_bytes

        if job.state != "done":
            raise ValueError(f"job {job.job_id} is {job.state}: {job.error}")
        return proofs_from_bytes(job.proof), [[int(v) for v in json.loads(p)] for p in job.public_inputs_json]


# --------------------------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------------------------


def _summary(job: pb.JobReply) -> dict:
    return {"job_id": job.job_id, "state": job.state, "priority": job.priority, "circuit": job.circuit,
            "preset": job.preset, "proof_bytes": len(job.proof), "partitions": len(job.public_inputs_json),
            "error": job.error, "done_seq": job.done_seq, "timed_out": job.timed_out,
            "seconds": round(job.finished_at - job.submitted_at, 3) if job.finished_at else None}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cuzk_jax client", description="client of the cuzk_jax daemon")
    p.add_argument("--address", default=os.environ.get("CUZK_ADDRESS", DEFAULT_ADDRESS),
                   help="unix:PATH or HOST:PORT (default $CUZK_ADDRESS or %(default)s)")
    p.add_argument("--token_file", default="", help="file holding the bearer token")
    p.add_argument("--tls_ca", default="", help="PEM certificate to trust (TLS addresses)")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("submit", help="submit a proof job")
    s.add_argument("--job_id", required=True)
    s.add_argument("--circuit", required=True)
    s.add_argument("--preset", default="")
    s.add_argument("--priority", default="", help="winning_post, window_post, porep, snap_deals (default: circuit's)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--inputs", help="local JSON file: a list of per-partition input objects (sent with the request)")
    g.add_argument("--input_path", help="a JSON input file on the server, under its input_dir")
    g.add_argument("--sample", help="SEED:PARTITIONS: sample inputs (sector-style job)")
    w = sub.add_parser("wait", help="wait for a job; print its summary (and write its proof with --out)")
    w.add_argument("--job_id", required=True)
    w.add_argument("--timeout", type=float, default=0, help="seconds (0: the server's maximum)")
    w.add_argument("--out", default="", help="write the proof bytes (192 per partition) here")
    for name in ("poll", "cancel"):
        sub.add_parser(name, help=f"{name} a job").add_argument("--job_id", required=True)
    sub.add_parser("status", help="queue, device and key status (JSON)")
    sub.add_parser("metrics", help="Prometheus metrics text")
    sub.add_parser("pause", help="stop forming new batches (synthesis and running batches go on)")
    sub.add_parser("resume", help="form batches again")
    for name in ("preload", "evict"):
        k = sub.add_parser(name, help=f"{name} a circuit's proving key")
        k.add_argument("--circuit", required=True)
        k.add_argument("--preset", default="")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        token = open(args.token_file, encoding="utf-8").read().strip() if args.token_file else None
        with Client(args.address, token=token, tls_ca=args.tls_ca or None) as c:
            if args.command == "submit":
                kw = {}
                if args.inputs:
                    with open(args.inputs, encoding="utf-8") as fh:
                        kw["inputs"] = fh.read()
                elif args.input_path:
                    kw["input_path"] = args.input_path
                else:
                    seed, sep, n = args.sample.partition(":")
                    if not sep or not seed.isdigit() or not n.isdigit():
                        raise ValueError(f"--sample={args.sample}: expected SEED:PARTITIONS")
                    kw["sample"] = (int(seed), int(n))
                r = c.submit(args.job_id, args.circuit, args.preset, priority=args.priority, **kw)
                print(json.dumps({"job_id": r.job_id, "existing": r.existing, "state": r.state}))
                return 0
            if args.command in ("wait", "poll"):
                job = c.wait(args.job_id, args.timeout) if args.command == "wait" else c.poll(args.job_id)
                if args.command == "wait" and args.out and job.state == "done":
                    from cuzk_jax.fileio import atomic_write

                    atomic_write(args.out, job.proof)
                print(json.dumps(_summary(job)))
                if job.state == "queued":
                    return 3 if args.command == "wait" else 0
                return 0 if job.state == "done" else 1
            if args.command == "cancel":
                r = c.cancel(args.job_id)
                print(json.dumps({"job_id": r.job_id, "cancelled": r.cancelled, "state": r.state}))
                return 0
            if args.command == "status":
                print(json.dumps(c.status(), indent=1))
                return 0
            if args.command == "metrics":
                print(c.metrics(), end="")
                return 0
            if args.command in ("pause", "resume"):
                r = c.pause(args.command == "pause")
                print(json.dumps({"paused": r.paused, "changed": r.changed}))
                return 0
            fn = c.preload if args.command == "preload" else c.evict
            r = fn(args.circuit, args.preset)
            print(json.dumps({"changed": r.changed, "resident": json.loads(r.json)}))
            return 0
    except grpc.RpcError as e:
        print(f"error: {e.code().name}: {e.details()}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
