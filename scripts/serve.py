"""Run the proving daemon: cuzk's gRPC API (submit / await / poll / cancel / status / preload / evict / metrics) over
one pipelined engine, with priority classes, a SQLite job journal and Prometheus metrics (docs/service.md).

  python -m cuzk_jax serve                                  # unix socket under ~/.cache/cuzk_jax/service/
  python -m cuzk_jax serve --config=/etc/cuzk/service.toml --address=localhost:50061 --preload=porep_like/domain20
  python -m cuzk_jax client submit --job_id=s1 --circuit=porep_like --preset=tiny --sample=1:2
  python -m cuzk_jax client wait --job_id=s1 --out=s1.proof

Settings come from --config (TOML) and then from the flags given (a flag overrides the file). Listening beyond
localhost needs --tls_cert, --tls_key and --token_file. SIGTERM / SIGINT stop the daemon; unfinished jobs stay in
the journal and resume at the next start. Exit status: 0 after a clean stop, 2 bad configuration.
"""

import logging

from absl import flags

from cuzk_jax import cli

cli.define_path("config", None, "TOML configuration file (docs/service.md)")
flags.DEFINE_string("address", None, "unix:PATH or HOST:PORT to listen on")
cli.define_path("journal", None, "SQLite job journal")
cli.define_path("key_dir", None, "proving key cache directory")
cli.define_path("input_dir", None, "directory input_path requests may read ('' refuses them)")
cli.define_path("tls_cert", None, "PEM server certificate (TLS)")
cli.define_path("tls_key", None, "PEM server private key (TLS)")
cli.define_path("token_file", None, "file holding the bearer token clients must send")
flags.DEFINE_string("metrics_address", None, "HOST:PORT of the Prometheus HTTP endpoint ('' for none)")
flags.DEFINE_enum("backend", None, ["device", "host"], "device: the prove pipeline; host: Python-int reference")
flags.DEFINE_integer("max_batch", None, "largest device batch (partitions)")
flags.DEFINE_float("max_wait_s", None, "ceiling on a ready partition's wait for its batch (0: engine default)")
flags.DEFINE_enum("fill", None, ["predict", "wait"], "batch forming rule")
flags.DEFINE_enum("synthesis", None, ["process", "thread"], "synthesis workers")
flags.DEFINE_integer("workers", None, "synthesis workers (0: cores - 1)")
flags.DEFINE_integer("prefetch", None, "batches staged on the device while one runs")
flags.DEFINE_integer("key_budget_bytes", None, "device budget for resident keys (0: none)")
flags.DEFINE_integer("witness_budget_bytes", None, "host bytes of witnesses in synthesis, ready or staging (0: none)")
flags.DEFINE_string("prover", None, "prove pipeline config text")
flags.DEFINE_list("preload", None, "circuit[/preset] keys to load at start")
flags.DEFINE_bool("precompile", None, "compile a resident key's device programs for every batch shape when it is "
                  "placed (default: on)")
flags.DEFINE_bool("split_synthesis", None, "split a partition over synthesis workers that would otherwise idle "
                  "(default: on)")
flags.DEFINE_list("priority_delays", None, "class=seconds urgency delays, e.g. porep=300,snap_deals=900")
flags.DEFINE_integer("max_request_bytes", None, "largest request accepted")
flags.DEFINE_integer("max_partitions", None, "most partitions per job")
cli.define_cache_dir_flag()
FLAGS = flags.FLAGS

_DIRECT = ("address", "journal", "key_dir", "input_dir", "tls_cert", "tls_key", "token_file", "metrics_address",
           "backend", "max_batch", "max_wait_s", "fill", "synthesis", "workers", "prefetch", "key_budget_bytes",
           "witness_budget_bytes",
           "prover", "preload", "max_request_bytes", "max_partitions", "precompile", "split_synthesis")


def config_from_flags():
    """The :class:`~cuzk_jax.service.config.ServiceConfig` of --config overridden by the flags given."""
    from cuzk_jax.errors import BadInput
    from cuzk_jax.service.config import ServiceConfig

    cfg = ServiceConfig.from_toml(FLAGS.config) if FLAGS.config else ServiceConfig()
    values = {name: FLAGS[name].value for name in _DIRECT if FLAGS[name].value is not None}
    if FLAGS.priority_delays is not None:
        delays = dict(cfg.priority_delays_s)
        for item in FLAGS.priority_delays:
            name, sep, sec = item.partition("=")
            try:
                delays[name] = float(sec)
            except ValueError:
                raise BadInput(f"--priority_delays: {item!r} is not CLASS=SECONDS") from None
            if not sep:
                raise BadInput(f"--priority_delays: {item!r} is not CLASS=SECONDS")
        values["priority_delays_s"] = delays
    return cfg.replace(values, where="flags").check()


def main(argv):
    del argv
    from cuzk_jax.service import server

    cfg = config_from_flags()
    cli.use_cache_dir(FLAGS.cache_dir)  # key setup and loading compile small programs with either backend
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    server.serve(cfg, announce=lambda line: print(line, flush=True))


def run():
    cli.run(main)


if __name__ == "__main__":
    run()
