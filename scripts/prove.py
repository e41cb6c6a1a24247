"""Prove sectors of a circuit (all partitions of a sector in one device batch) and verify the proofs.

  python3 scripts/prove.py --circuit=porep_like --preset=tiny --partitions=10 --sectors=1 --out=proofs/  # or cuzk-prove
  python3 scripts/prove.py --preset=small --sectors=4 --max_batch=20        # several sectors: the engine
  python3 scripts/prove.py --zkey=c.zkey --wtns=w.wtns --proof=proof.json --public=public.json   # circom/snarkjs
  python3 scripts/prove.py --zkey=c.zkey --wasm=c_js/c.wasm --input=input.json    # like snarkjs groth16 fullprove
  python3 scripts/prove.py --preset=domain20 --sectors=8 --devices=0,1 --device_mode=per_device   # two local GPUs
  python3 scripts/prove.py --sectors=8 --coordinator=host0:8476 --num_processes=2 --process_id=0  # on host 0 ...
  python3 scripts/prove.py --sectors=8 --coordinator=host0:8476 --num_processes=2 --process_id=1  # ... and host 1

Keys come from the key cache (setup on first use). Prints per-phase timing per sector; writes
``sector-<k>.proofs`` (192 bytes per partition) and ``sector-<k>.public.json`` under --out.

``--mode``: ``sequential`` proves one sector after another (each sector one batch); ``engine`` submits every sector
to :class:`cuzk_jax.engine.Engine` (synthesis workers overlapping the device, partitions of several sectors in one
batch of up to ``--max_batch``); ``auto`` (default) is the engine for more than one sector.

Several local devices (``--devices``, default all): ``--device_mode=per_device`` runs one engine per device (keys
committed per device, each sector's partitions split over the devices), ``sharded`` one engine whose batches are
sharded over a mesh of the devices (:mod:`cuzk_jax.engine.multidevice`); more than one device means engine mode.

Several processes or hosts (``--coordinator=host:port --num_processes=N --process_id=i``, or the environment
variables ``CUZK_COORDINATOR`` / ``CUZK_NUM_PROCESSES`` / ``CUZK_PROCESS_ID``): run the same command once per host
(or per GPU, with ``--devices=<i>``), each with its own ``--process_id``. Process 0 runs the coordinator and decides
the sectors; partitions are assigned by process index, proved on each process's local devices, gathered to process
0, verified there, and written there only (:mod:`cuzk_jax.engine.distributed`). Every process gets the same exit
status. A coordinator that cannot be reached within ``--dist_timeout`` seconds is one ``error:`` line, exit 2. Every
process needs the same proving key: copy process 0's key cache (``--key_dir``) to the other hosts.

With ``--zkey`` and ``--wtns`` it proves a circom circuit from snarkjs files instead (``cuzk_jax.snarkjs``) and
writes snarkjs's ``proof.json`` / ``public.json``; ``npx snarkjs groth16 verify`` accepts them.

Output paths are checked before any work (directories created, writable); every output is written atomically
(temporary file in the same directory, fsync, rename: never a partial file). Exit status: 0 ok, 1 a proof did not
verify (nothing is written for it), 2 bad usage or bad input (one ``error:`` line on stderr).
"""

import json
import os
import sys
import time

import tqdm
from absl import app, flags

from cuzk_jax import cli, fileio
from cuzk_jax.errors import ProofRejected

flags.DEFINE_string("circuit", "porep_like", "circuit name (cube, merkle_inclusion, porep_like)")
flags.DEFINE_string("preset", "", "circuit preset (default: the circuit's own, e.g. tiny for porep_like)")
flags.DEFINE_integer("partitions", 10, "partitions per sector (proved in one batch)")
flags.DEFINE_integer("sectors", 1, "number of sectors to prove")
flags.DEFINE_integer("first_sector", 0, "seed/index of the first sector")
cli.define_path("out", "proofs", "output directory for proofs and public inputs ('' = do not write)")
cli.define_path("key_dir", "", "proving-key cache directory (default ~/.cache/cuzk_jax/keys)")
flags.DEFINE_bool("verify", True, "verify every proof (pairing check through py_arkworks_bls12381)")
flags.DEFINE_string("prover", "", "prover config, comma-separated key=value: msm=xla|pallas[:block=B:warps=W...], "
                    "ntt=xla|pallas[...], tables=auto|on|off (precomputed MSM window tables of the key, W-fold its "
                    "device memory; auto: on a GPU when they fit a quarter of its memory), window=K; '' = defaults")
cli.define_path("timings_json", "", "write per-sector timings to this JSON file")
cli.define_path("snarkjs_out", "", "also export every partition's proof for snarkjs: <dir>/verification_key.json and "
                "<dir>/sector-<k>/partition-<p>/{proof,public}.json (snarkjs groth16 verify accepts them)")
flags.DEFINE_enum("mode", "auto", ["auto", "sequential", "engine"], "how several sectors are proved (see above)")
flags.DEFINE_integer("max_batch", 0, "engine: partitions per device batch (0 = 2 sectors' worth)")
flags.DEFINE_integer("workers", 0, "engine: synthesis workers (0 = cores - 1)")
flags.DEFINE_string("witness_budget", "", "engine: host memory for witnesses in synthesis, ready or staging, e.g. "
                    "64GiB (empty: no bound); at sector scale a partition holds ~4 GiB")
flags.DEFINE_string("devices", "", "local devices to prove on: comma-separated indices into jax.local_devices() "
                    "('' = all of them); with --coordinator and one process per GPU: the GPU(s) this process claims")
flags.DEFINE_enum("device_mode", "per_device", ["per_device", "sharded"], "several devices: one engine per device "
                  "(per_device) or one batch sharded over all of them (sharded)")
flags.DEFINE_string("coordinator", "", "multi-process run: host:port of process 0's coordinator (env CUZK_COORDINATOR)")
flags.DEFINE_integer("num_processes", None, "multi-process run: number of processes (env CUZK_NUM_PROCESSES)")
flags.DEFINE_integer("process_id", None, "multi-process run: this process, 0..num_processes-1 (env CUZK_PROCESS_ID)")
flags.DEFINE_float("dist_timeout", 300.0, "multi-process run: seconds to wait for the coordinator and the other "
                   "processes before giving up with an error")
cli.define_path("zkey", "", "snarkjs Groth16 proving key (.zkey); with --wtns: prove a circom circuit")
cli.define_path("wtns", "", "circom witness file (.wtns), with --zkey")
cli.define_path("wasm", "", "with --zkey and --input: the circuit's circom WebAssembly (snarkjs groth16 fullprove: the "
                "witness is computed by snarkjs wtns calculate, which needs Node)")
cli.define_path("input", "", "with --zkey and --wasm: the circuit's input JSON")
cli.define_path("proof", "proof.json", "with --zkey: output proof in snarkjs's JSON layout")
cli.define_path("public", "public.json", "with --zkey: output public signals in snarkjs's JSON layout")
flags.DEFINE_enum("backend", "device", ["device", "host"],
                  "with --zkey: device (XLA ops) or host (Python ints + py_arkworks_bls12381, the slow oracle)")
flags.DEFINE_bool("check_points", True, "with --zkey: check that every zkey point is on its curve while reading")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS


def _prove_snarkjs():
    from cuzk_jax.snarkjs import prover

    full = bool(FLAGS.wasm or FLAGS.input)
    if full and not (FLAGS.zkey and FLAGS.wasm and FLAGS.input) or full and FLAGS.wtns:
        raise app.UsageError("--zkey, --wasm and --input go together (fullprove), without --wtns")
    if not full and not (FLAGS.zkey and FLAGS.wtns):
        raise app.UsageError("--zkey and --wtns go together")
    for flag in ("proof", "public"):  # before reading anything
        if FLAGS[flag].value:
            cli.check_output_file(FLAGS[flag].value, flag)
    # snarkjs's layout (JSON.stringify(obj, null, 1)), written atomically (cuzk_jax.fileio) after verification
    kw = dict(backend=FLAGS.backend, check_points=FLAGS.check_points)
    if full:
        res = prover.fullprove(FLAGS.wasm, FLAGS.input, FLAGS.zkey, FLAGS.proof or None, FLAGS.public or None, **kw)
    else:
        res = prover.prove_files(FLAGS.zkey, FLAGS.wtns, FLAGS.proof or None, FLAGS.public or None, **kw)
    print(json.dumps({"proof": FLAGS.proof, "public": FLAGS.public, "backend": FLAGS.backend,
                      "timings_s": {k: round(v, 4) for k, v in res.timings.items()}}))


def _report(circuit, res, vk=None) -> None:
    from cuzk_jax.groth16 import sector

    if res.verified is False:  # never write a proof that did not verify
        raise ProofRejected(f"sector {res.sector}: some proofs did not verify; nothing written for it")
    if FLAGS.snarkjs_out:
        from cuzk_jax.snarkjs import export

        export.write_verification_key(os.path.join(FLAGS.snarkjs_out, "verification_key.json"), vk)
        for p, (proof, public) in enumerate(zip(res.proofs, res.public_inputs)):
            d = os.path.join(FLAGS.snarkjs_out, f"sector-{res.sector}", f"partition-{p}")
            os.makedirs(d, exist_ok=True)
            export.write_proof(os.path.join(d, "proof.json"), proof)
            export.write_public(os.path.join(d, "public.json"), public)
        print(f"  sector {res.sector}: snarkjs files under {FLAGS.snarkjs_out}")
    if FLAGS.out:
        paths = sector.write_sector(FLAGS.out, circuit, res)
        print(f"  sector {res.sector}: wrote {paths[0]} ({len(res.proof_bytes())} bytes) and {paths[1]}")
    print("  " + "  ".join(f"{name} {sec * 1e3:.1f}ms" for name, sec in res.timings.phases.items()))
    print(f"  total {res.timings.total:.3f}s" + ("" if res.verified is None else
                                                  f"; verified: {'OK' if res.verified else 'FAILED'}"), flush=True)


def _sequential(circuit, pk, sectors):
    from cuzk_jax.groth16 import sector

    out = []
    for k in sectors:
        print(f"sector {k}: proving {FLAGS.partitions} partitions ...", flush=True)
        res = sector.prove_sector(circuit, pk, FLAGS.partitions, k, verify=FLAGS.verify)
        _report(circuit, res, pk.vk)
        out.append(res)
    return out


def _engine(circuit, pk, sectors, config, devices):
    from cuzk_jax.engine.multidevice import MultiDeviceEngine

    max_batch = FLAGS.max_batch or 2 * FLAGS.partitions
    print(f"engine: {len(sectors)} sectors x {FLAGS.partitions} partitions, batches of up to {max_batch}, "
          f"{len(devices)} device(s) ({FLAGS.device_mode if len(devices) > 1 else 'one engine'})", flush=True)
    out = []
    from cuzk_jax.groth16.plan import parse_bytes  # (checked in main)

    with MultiDeviceEngine(FLAGS.device_mode, devices, max_batch=max_batch, synthesis_workers=FLAGS.workers or None,
                           prover=config, verify=FLAGS.verify,
                           host_budget_bytes=parse_bytes(FLAGS.witness_budget)) as eng:  # each sector verified before it returns
        eng.preload(circuit, pk)
        futures = [eng.submit_sector(circuit, sector=k, partitions=FLAGS.partitions) for k in sectors]
        bar = tqdm.tqdm(total=len(futures), desc="sectors", unit="sector",
                        disable=len(futures) < 2 or not sys.stderr.isatty())  # a bar for people, not for logs
        for fut in futures:
            res = fut.result()  # raises the job's own error (Unsatisfied, ProofRejected, ...) if it failed
            _report(circuit, res, pk.vk)
            out.append(res)
            bar.update()
        bar.close()
        st = eng.status()
    per = st["engines"]
    rate = sum(e["proofs_per_minute"] for e in per)
    print(f"engine: {rate:.1f} proofs/min, batches {[e['batch_sizes'] for e in per]}", flush=True)
    return out


def _distributed(circuit, pk, sectors, config, pconf):
    from cuzk_jax.engine import distributed

    print(f"process {pconf.process_id}/{pconf.num_processes}: proving its share of {len(sectors)} sector(s) x "
          f"{FLAGS.partitions} partitions", flush=True)
    res = distributed.prove_sectors(circuit, pk, sectors, FLAGS.partitions, mode=FLAGS.device_mode,
                                    verify=FLAGS.verify, prover=config,
                                    max_batch=FLAGS.max_batch or 2 * FLAGS.partitions,
                                    synthesis_workers=FLAGS.workers or None)
    print(f"process {res.process_id}: proved {len(res.items)} partition(s) in {res.local_s:.3f} s (device busy "
          f"{', '.join(f'{b:.3f}' for b in res.busy_s) or '-'} s), gathered in {res.gather_s:.3f} s", flush=True)
    for r in res.sectors:  # process 0 only: every sector, verified
        _report(circuit, r, pk.vk)
    return res.sectors


def main(argv):
    del argv
    cli.use_cache_dir(FLAGS.cache_dir)
    if FLAGS.zkey or FLAGS.wtns or FLAGS.wasm or FLAGS.input:
        return _prove_snarkjs()
    from cuzk_jax import keycache
    from cuzk_jax.circuits import base

    if FLAGS.sectors < 1 or FLAGS.partitions < 1:
        raise app.UsageError("--sectors and --partitions must be at least 1")
    from cuzk_jax.engine import distributed

    pconf = distributed.ProcessConfig.resolve(FLAGS.coordinator, FLAGS.num_processes, FLAGS.process_id,
                                              FLAGS.devices if FLAGS.coordinator else None, FLAGS.dist_timeout)
    if pconf is not None:  # before any other JAX call of this process
        distributed.initialize(pconf)
    if FLAGS.out:  # output paths before any work
        cli.check_output_dir(FLAGS.out, "out")
    if FLAGS.timings_json:
        cli.check_output_file(FLAGS.timings_json, "timings_json")
    if FLAGS.snarkjs_out:
        cli.check_output_dir(FLAGS.snarkjs_out, "snarkjs_out")
    from cuzk_jax.groth16 import pipeline, prover

    config = pipeline.ProverConfig.parse(FLAGS.prover)  # a bad --prover fails before synthesis and setup
    from cuzk_jax.groth16.plan import parse_bytes

    parse_bytes(FLAGS.witness_budget)  # so does a bad --witness_budget
    from cuzk_jax.engine.multidevice import select_devices

    # a bad --devices fails before setup too; distributed: --devices named the local_device_ids this process
    # claimed, and its local devices are those
    devices = select_devices(FLAGS.devices if pconf is None else None)
    circuit = base.get_circuit(FLAGS.circuit, FLAGS.preset)
    print(f"circuit {circuit}: synthesizing structure ...", flush=True)
    r1cs = circuit.r1cs(cache=True)  # the compiled circuit file: synthesized once per shape, then loaded
    print(f"  {r1cs.num_constraints} constraints, {r1cs.num_public} public inputs, {r1cs.num_aux} private", flush=True)
    t_key = time.perf_counter()
    pk = keycache.load_or_setup(circuit, r1cs, directory=FLAGS.key_dir or None, progress=lambda m: print(m, flush=True))
    t_key = time.perf_counter() - t_key
    sectors = list(range(FLAGS.first_sector, FLAGS.first_sector + FLAGS.sectors))
    mode = FLAGS.mode if FLAGS.mode != "auto" else ("engine" if len(sectors) > 1 or len(devices) > 1 else "sequential")
    if pconf is not None:
        mode, used = "distributed", str(config)
        results = _distributed(circuit, pk, sectors, config, pconf)
    elif mode == "engine" or len(devices) > 1:
        mode, used = "engine", str(config)
        results = _engine(circuit, pk, sectors, config, devices)
    else:
        import jax

        with jax.default_device(devices[0]):  # the one device chosen (default: the first local device)
            t_res = time.perf_counter()
            rk = prover.resident(pk, r1cs, config)  # device arrays and, if chosen, window tables: once for all
            used = str(rk.config) + (f" (window tables built in {time.perf_counter() - t_res:.1f} s, "
                                     f"{rk.table_bytes / 2**30:.2f} GiB)" if rk.tables else " (no window tables)")
            print(f"prover: {used}", flush=True)
            results = _sequential(circuit, rk, sectors)
    rows = [{"sector": r.sector, **r.timings.as_dict(), "synthesis": r.synthesis_s, "verified": r.verified}
            for r in results]
    if FLAGS.timings_json:
        fileio.atomic_write(FLAGS.timings_json, json.dumps(
            {"circuit": FLAGS.circuit, "preset": circuit.preset, "partitions": FLAGS.partitions,
             "constraints": r1cs.num_constraints, "domain": pk.domain_size, "mode": mode,
             "key_s": round(t_key, 3),  # setup (first run) or loading the cached key
             "prover": used, "sectors": rows}, indent=1))
    print(f"{FLAGS.sectors} sector(s) x {FLAGS.partitions} partitions proved ({mode})"
          + (" and verified" if FLAGS.verify else ""))


def run():
    cli.run(main)  # bad input: one error line, exit 2; a proof that did not verify (ProofRejected): exit 1


if __name__ == "__main__":
    run()
