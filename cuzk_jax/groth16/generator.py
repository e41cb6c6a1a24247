"""Groth16 circuit-specific setup (arkworks ``generator.rs``): toxic waste -> proving and verifying keys.

Formulas are those of :mod:`cuzk_jax.reference.groth16` (the oracle). Two implementations give the same key bit for
bit (:func:`setup` picks one per platform):

* host scalars (:func:`setup` with ``method="host"``): the scalars as Python ints (Lagrange basis at tau with one
  batched inversion, then the sparse column sums ``u_i(tau) = sum_j A[j][i] L_j(tau)``), then all query points
  from ONE batched fixed-base scalar multiplication per group on the device (:func:`cuzk_jax.ops.fixed_base.mul`);
* the device setup (:func:`development_setup`, ``method="device"``): the scalars as device array programs
  (:mod:`cuzk_jax.ops.setup_scalars`) and the points by the batch-affine fixed-base method
  (:func:`cuzk_jax.ops.fixed_base.mul_affine`) -- nothing per constraint or point in Python, for sector-sized keys
  (docs/keys.md).

The toxic waste comes from the OS CSPRNG (``secrets``) and is dropped when :func:`setup` returns. For tests,
:func:`insecure_toxic_waste_for_tests` derives it from a seed; keys made that way are forgeable by anyone who knows
the seed, and the name says so.

Progress: each phase (host scalars, G1 points, G2 points, key assembly) is logged (``logging``, logger
``cuzk_jax.groth16.generator``; absl routes it) when it starts and ends, with its time; the fixed-base chunks show a
``tqdm`` progress bar when there are several of them (a set-up long enough to wait for) and stderr is a terminal.
"""

from __future__ import annotations

import logging
import random
import secrets
import contextlib
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from cuzk_jax import encoding
from cuzk_jax.ops import curve as C
from cuzk_jax.ops import fixed_base
from cuzk_jax.reference import groth16 as ref
from cuzk_jax.reference.constants import R
from cuzk_jax.reference.field import fr
from cuzk_jax.reference.groth16 import ToxicWaste

from cuzk_jax.compile_cache import compile_in_threads, install_compile_hint

from . import host_curve
from .data_structures import ProvingKey, VerifyingKey, check_h_form

log = logging.getLogger(__name__)

#: The H query form new keys get (:data:`~cuzk_jax.groth16.data_structures.H_FORMS`): ``"lagrange"``, whose H step
#: is one transform shorter than bellman's; same proofs either way.
DEFAULT_H_FORM = "lagrange"


def _draw(randbelow) -> int:
    return 1 + randbelow(R - 1)


def random_toxic_waste() -> ToxicWaste:
    """Toxic waste from the OS CSPRNG (``secrets``)."""
    return ToxicWaste(*(_draw(secrets.randbelow) for _ in range(5)))


def insecure_toxic_waste_for_tests(seed: int) -> ToxicWaste:
    """Deterministic toxic waste from ``seed``: FOR TESTS ONLY (anyone knowing the seed can forge proofs)."""
    rnd = random.Random(seed)
    return ToxicWaste(*(_draw(rnd.randrange) for _ in range(5)))


def lagrange_at(n: int, tau: int, generator: int = 7, odd: bool = False) -> list[int]:
    """``L_j(tau) = w^j (tau^n - 1) / (n (tau - w^j))`` for the size-n domain with ``w = generator^((r-1)/n)``
    (7 for our domains, 5 for snarkjs's), with one batched inversion.

    ``odd``: the size-2n domain's basis at its n odd points instead, ``L^(2n)_(2j+1)(tau) = g w^j (tau^(2n) - 1) /
    (2n (tau - g w^j))`` with ``g = generator^((r-1)/2n)`` (a Lagrange H query, ``data_structures.H_FORMS``)."""
    size, shift = (2 * n, pow(generator, (R - 1) // (2 * n), R)) if odd else (n, 1)
    w = pow(generator, (R - 1) // n, R)
    z = (pow(tau, size, R) - 1) % R
    if z == 0:
        raise ValueError("tau lies in the evaluation domain; draw new toxic waste")
    ws = [shift] * n
    for j in range(1, n):
        ws[j] = ws[j - 1] * w % R
    inv = fr.batch_inv([(tau - x) % R for x in ws])
    k = z * pow(size, R - 2, R) % R
    return [x * k % R * y % R for x, y in zip(ws, inv)]


def h_scalars(n: int, toxic: ToxicWaste, h_form: str) -> list[int]:
    """The H query's scalars (host ints) for a domain of ``n``: ``tau^i Z(tau) / delta`` for ``i < n - 1``
    (``"coefficients"``) or ``L^(2n)_(2i+1)(tau) / delta`` for ``i < n`` (``"lagrange"``;
    ``data_structures.H_FORMS``)."""
    dinv = pow(toxic.delta, R - 2, R)
    if h_form == "lagrange":
        return [x * dinv % R for x in lagrange_at(n, toxic.tau, odd=True)]
    out, acc = [], (pow(toxic.tau, n, R) - 1) * dinv % R
    for _ in range(n - 1):
        out.append(acc)
        acc = acc * toxic.tau % R
    return out


def h_scalar_at(i: int, n: int, toxic: ToxicWaste, h_form: str) -> int:
    """Entry ``i`` of :func:`h_scalars` alone (a spot check of a large key's H query)."""
    dinv = pow(toxic.delta, R - 2, R)
    if h_form == "lagrange":
        x = pow(7, (R - 1) // (2 * n) * (2 * i + 1), R)  # g w^i = w_2n^(2i+1)
        k = (pow(toxic.tau, 2 * n, R) - 1) * pow(2 * n, R - 2, R) % R
        return k * x % R * pow((toxic.tau - x) % R, R - 2, R) % R * dinv % R
    return pow(toxic.tau, i, R) * (pow(toxic.tau, n, R) - 1) % R * dinv % R


def column_evals(matrix, coeffs, num_vars: int, lag: list[int]) -> list[int]:
    """``sum_j M[j][i] L_j(tau)`` per column, from a CSR ``SparseMatrix`` and its coefficient table."""
    rows = matrix.row_ids().tolist()
    cols = matrix.cols.tolist()
    cids = matrix.coeff_ids.tolist()
    acc = [0] * num_vars
    for j, i, c in zip(rows, cols, cids):
        acc[i] += coeffs[c] * lag[j]
    return [v % R for v in acc]


def _points(affine: C.Affine, start: int, stop: int) -> C.Affine:
    return jax.tree_util.tree_map(lambda a: a[..., start:stop], affine)


# a progress bar when the fixed-base multiplication runs at least this many chunks (each chunk is ~1 s or more on a
# CPU; fewer finish before a bar is worth drawing)
BAR_MIN_CHUNKS = 4


@contextlib.contextmanager
def _phase(name: str, progress=None, timings: dict | None = None, key: str | None = None):
    """Log ``name`` as it starts and ends (with its time); ``progress`` (e.g. ``print``) gets the start line too, so
    a script shows what it is waiting for (the summary line at the end has every phase's time). ``timings[key]``:
    the phase's seconds, when both are given."""
    log.info("setup: %s ...", name)
    if progress:
        progress(f"  setup: {name} ...")
    t0 = time.perf_counter()
    yield
    dt = time.perf_counter() - t0
    log.info("setup: %s done in %.2fs", name, dt)
    if timings is not None and key is not None:
        timings[key] = round(dt, 3)


def _progress_bar(total: int, desc: str):
    """A tqdm bar over ``total`` chunks on stderr, or None (tqdm missing, few chunks, or stderr not a terminal)."""
    if total < BAR_MIN_CHUNKS or not getattr(sys.stderr, "isatty", lambda: False)():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency; the bar is optional all the same
        return None
    return tqdm(total=total, desc=desc, unit="chunk", leave=False)


def _fixed_base(curve: C.Curve, scalars: list[int], desc: str) -> C.Affine:
    """``fixed_base.mul`` over ``scalars`` one chunk at a time (the same compiled program per chunk as
    ``fixed_base.mul`` itself), advancing a progress bar when the work is long enough for one."""
    limbs = encoding.ints_to_limbs(scalars, "fr")
    n = limbs.shape[1]
    chunk = fixed_base.default_chunk(n)
    starts = range(0, n, chunk)
    bar = _progress_bar(len(starts), desc)
    if bar is None:
        return jax.block_until_ready(fixed_base.mul(curve, limbs, chunk=chunk))
    outs = []
    try:
        for start in starts:
            outs.append(jax.block_until_ready(fixed_base.mul(curve, limbs[:, start:start + chunk], chunk=chunk)))
            bar.update(1)
    finally:
        bar.close()
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs, axis=-1), *outs)


SCALAR_METHODS = ("host", "device")
FIXED_BASE_METHODS = ("affine", "bucket", "jacobian")


def default_fixed_base(curve_name: str, platform: str | None = None) -> str:
    """The fixed-base method :func:`development_setup` uses for a group when ``points`` is None: ``"bucket"`` on a
    GPU for both groups (the MSM's Pallas kernel; exact on the H200 and 11x (G1) / >30x (G2) the batch-affine
    method's points per second there, ``bench/results/RESULTS.md``, sessions 10 and 11), ``"affine"`` elsewhere
    (the kernel runs only interpreted on a CPU). ``curve_name`` is kept so a group can get its own default again."""
    if curve_name not in ("g1", "g2"):
        raise ValueError(f"unknown group {curve_name!r}; expected g1 or g2")
    platform = platform or jax.default_backend()
    return "bucket" if platform == "gpu" else "affine"


def setup(r1cs, toxic: ToxicWaste | None = None, progress=None, method: str | None = None,
          h_form: str = DEFAULT_H_FORM) -> ProvingKey:
    """Circuit-specific setup for ``r1cs`` (a :class:`cuzk_jax.circuits.r1cs.R1CS`).

    ``toxic=None`` draws fresh toxic waste from the OS CSPRNG. Returns a :class:`ProvingKey` whose queries live on
    the default device (``pk.vk`` is the verifying key). ``progress`` (e.g. ``print``) receives one line as each
    phase starts and a summary line with their times; the phases are logged as they start and end either way.
    ``method``: ``"host"`` (the scalars as Python ints, the Jacobian fixed-base method: below), ``"device"``
    (:func:`development_setup`: everything as device array programs), or None: ``"device"`` on an accelerator,
    ``"host"`` on CPU (whose tests compile the host path's one program only). Both give the same key bit for bit.
    ``h_form``: the H query's form (``data_structures.H_FORMS``): ``"lagrange"`` (the default: the prover's H step
    is one transform shorter, :func:`cuzk_jax.ops.qap.compute_h_lagrange`) or ``"coefficients"`` (bellman's, for
    keys that must match a bellman or arkworks setup).
    """
    check_h_form(h_form)
    if method is None:
        method = "host" if jax.default_backend() == "cpu" else "device"
    if method not in SCALAR_METHODS:
        raise ValueError(f"unknown setup method {method!r}; expected one of {SCALAR_METHODS}")
    if method == "device":
        return development_setup(r1cs, toxic, progress=progress, h_form=h_form)
    from cuzk_jax.ops import r1cs as ops_r1cs

    if getattr(r1cs, "tiling", None) is None:  # a tiled one is evaluated block by block (pipeline: tiled)
        ops_r1cs.check_indexable(r1cs)  # a key the prover cannot use fails here, not after the setup
    install_compile_hint()
    t0 = time.perf_counter()
    toxic = toxic or random_toxic_waste()
    ext = r1cs.with_input_constraints()
    n = ref.domain_size(ext.num_constraints)
    num_inputs, num_aux = r1cs.num_inputs, r1cs.num_aux
    num_vars = num_inputs + num_aux
    log.info("setup: %d constraints, domain 2^%d, %d vars", r1cs.num_constraints, n.bit_length() - 1, num_vars)
    with _phase("host scalars (Lagrange basis, column sums)", progress):
        lag = lagrange_at(n, toxic.tau)
        u, v, w = (column_evals(m, ext.coeffs, num_vars, lag) for m in ext.matrices())
        ginv, dinv = pow(toxic.gamma, R - 2, R), pow(toxic.delta, R - 2, R)
        lin = [(toxic.beta * u[i] + toxic.alpha * v[i] + w[i]) % R for i in range(num_vars)]
        h_s = h_scalars(n, toxic, h_form)
    t_host = time.perf_counter() - t0

    # One fixed-base batch per group; the order of the segments is recorded in `seg`.
    g1_segments = [("a_query", u), ("b_g1_query", v), ("h_query", h_s),
                   ("l_query", [x * dinv % R for x in lin[num_inputs:]]),
                   ("ic", [x * ginv % R for x in lin[:num_inputs]]),
                   ("fixed", [toxic.alpha, toxic.beta, toxic.delta])]
    g1_scalars = [s for _, seg in g1_segments for s in seg]
    with _phase(f"{len(g1_scalars)} G1 points (fixed-base)", progress):
        g1_pts = _fixed_base(C.g1, g1_scalars, "setup G1")
    t_g1 = time.perf_counter() - t0 - t_host
    g2_scalars = v + [toxic.beta, toxic.gamma, toxic.delta]
    with _phase(f"{len(g2_scalars)} G2 points (fixed-base)", progress):
        g2_pts = _fixed_base(C.g2, g2_scalars, "setup G2")
    t_g2 = time.perf_counter() - t0 - t_host - t_g1

    with _phase("keys (points to host)", progress):
        parts, start = {}, 0
        for name, seg in g1_segments:
            parts[name] = _points(g1_pts, start, start + len(seg))
            start += len(seg)
        ic = host_curve.affine_from_device(C.g1, parts["ic"])
        alpha_g1, beta_g1, delta_g1 = host_curve.affine_from_device(C.g1, parts["fixed"])
        beta_g2, gamma_g2, delta_g2 = host_curve.affine_from_device(C.g2, _points(g2_pts, num_vars, num_vars + 3))
        vk = VerifyingKey(alpha_g1=alpha_g1, beta_g2=beta_g2, gamma_g2=gamma_g2, delta_g2=delta_g2, ic=ic)
        pk = ProvingKey(vk=vk, beta_g1=beta_g1, delta_g1=delta_g1, a_query=parts["a_query"],
                        b_g1_query=parts["b_g1_query"], b_g2_query=_points(g2_pts, 0, num_vars),
                        h_query=parts["h_query"], l_query=parts["l_query"], num_inputs=num_inputs,
                        num_aux=num_aux, domain_size=n, circuit_digest=r1cs.digest(), h_form=h_form)
    msg = (f"setup: {r1cs.num_constraints} constraints, domain 2^{n.bit_length() - 1}, {num_vars} vars: host "
           f"scalars {t_host:.1f}s, {len(g1_scalars)} G1 points {t_g1:.1f}s, {len(g2_scalars)} G2 points {t_g2:.1f}s,"
           f" total {time.perf_counter() - t0:.1f}s")
    log.info("%s", msg)
    if progress:
        progress("  " + msg)
    return pk


# ---------------------------------------------------------------------------------------------------------------
# Device setup (development setup: one party, toxic waste from the OS CSPRNG; no ceremony)
# ---------------------------------------------------------------------------------------------------------------


#: Most Lagrange values per call of the device setup: four calls at a 2^27 domain, each ~6 GiB of temporaries.
#: One call of 2^27 (~25 GiB of temporaries, one block) preceded the sector op's only device OOM at 2^27 (session
#: 26: a 32 GiB block for the A MSM did not fit under a plan that fitted the engine's stream on the same machine):
#: suspected fragmentation of the device allocator's pool, not confirmed.
LAGRANGE_CHUNK = 1 << 25


def _next_pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def _write_at_fn(buf, piece, at):
    return jax.tree_util.tree_map(lambda b, p: jax.lax.dynamic_update_slice_in_dim(b, p, at, axis=-1), buf, piece)


@functools.lru_cache(maxsize=None)
def _donating(fn, platform: str):
    """``fn`` jitted with its first argument (the query buffer) donated, i.e. updated in place, where the platform
    supports donation (not XLA:CPU)."""
    return jax.jit(fn, donate_argnums=() if platform == "cpu" else (0,))


def _write_at(platform: str):
    """``buf[..., at:at + len(piece)] = piece`` for Affine batches (``buf`` donated: :func:`_donating`)."""
    return _donating(_write_at_fn, platform)


def _query_buffer(curve: C.Curve, size: int) -> C.Affine:
    """A query buffer of ``size`` points at infinity whose leaves are distinct arrays (``affine_identity`` shares
    one zero array for x and y, and one buffer cannot be donated twice in a call)."""
    return C.Affine(curve.field.zeros((size,)), curve.field.zeros((size,)), jnp.ones((size,), bool))


def _scatter_fn(buf, pts, idx):
    """``buf[..., idx] = pts`` for Affine batches."""
    # idx comes from np.flatnonzero: sorted and unique, which lets XLA skip the general scatter's ordering work
    return jax.tree_util.tree_map(lambda b, p: b.at[..., idx].set(p, indices_are_sorted=True, unique_indices=True),
                                  buf, pts)




# a query whose scalars are at least this share nonzero is multiplied as it is (compacting would save little)
DENSE_SHARE = 0.9


def _sparse_fixed_base_queries(curve: C.Curve, parts: list, *args, **kwargs) -> list:
    """:func:`_fixed_base_queries` over the nonzero scalars of each part only: a zero scalar's point is the point
    at infinity, which the query buffer already holds. PoRep-like circuits leave most of B's columns (and some of
    A's) unused, so this skips most of the G2 work. The nonzero mask comes to the host (one byte per scalar) to
    size the gather; the points are scattered back into a full-length query, so the key is the same."""
    compact, where = [], []
    for p in parts:
        n = int(p.shape[1])
        idx = np.flatnonzero(np.asarray(jnp.any(p != 0, axis=0)))
        if idx.size >= DENSE_SHARE * n:
            compact.append(p)
            where.append(None)
        else:
            idx = jnp.asarray(idx.astype(np.int32))
            compact.append(jnp.take(p, idx, axis=1, mode="clip", indices_are_sorted=True, unique_indices=True))
            where.append((idx, n))
    outs = _fixed_base_queries(curve, compact, *args, **kwargs)
    result = []
    for out, w in zip(outs, where):
        if w is None:
            result.append(out)
        else:
            idx, n = w
            result.append(_donating(_scatter_fn, jax.default_backend())(_query_buffer(curve, n), out, idx))
    return result


def _fixed_base_queries(curve: C.Curve, parts: list, window: int | None, chunk: int | None,
                        inv_chunk: int | None = None, fermat_window: int | None = None,
                        points: str = "affine") -> list:
    """One batch-affine fixed-base run (:func:`cuzk_jax.ops.fixed_base.mul_affine`; ``points="bucket"``: the
    bucket method on the MSM's Pallas kernel, :func:`~cuzk_jax.ops.fixed_base.mul_bucket`; ``points="jacobian"``:
    the Jacobian method :func:`~cuzk_jax.ops.fixed_base.mul`) over the concatenation of the scalar arrays
    ``parts`` (canonical Fr limbs ``(8, N_i)``, device), split back into one :class:`Affine` per part. A part
    spanning several chunks is written into one preallocated buffer (in place on an accelerator), so beside the
    key only one chunk's points are held twice."""
    sizes = [int(p.shape[1]) for p in parts]
    total = sum(sizes)
    if total == 0:
        return [curve.affine_identity((0,)) for _ in parts]
    if points not in FIXED_BASE_METHODS:
        raise ValueError(f"unknown fixed-base method {points!r}; expected one of {FIXED_BASE_METHODS}")
    if chunk is None:
        chunk = {"jacobian": fixed_base.default_chunk, "bucket": lambda _: fixed_base.default_bucket_chunk(),
                 "affine": fixed_base.default_affine_chunk}[points](total)
    starts = list(range(0, total, chunk))
    offsets = [sum(sizes[:k]) for k in range(len(parts))]
    bar = _progress_bar(len(starts), f"setup {curve.name}")
    outs: dict[int, C.Affine] = {}

    def chunk_scalars(lo, hi):  # the scalars [lo, hi) of the virtual concatenation, without concatenating it all
        pieces = [p[:, max(lo, o) - o:min(hi, o + sz) - o] for p, o, sz in zip(parts, offsets, sizes)
                  if o < hi and o + sz > lo]
        return pieces[0] if len(pieces) == 1 else jnp.concatenate(pieces, axis=1)

    def chunk_out(i):
        if i not in outs:
            sc = chunk_scalars(starts[i], min(total, starts[i] + chunk))
            if points == "jacobian":
                outs[i] = fixed_base.mul(curve, sc, chunk=chunk)
            elif points == "bucket":
                outs[i] = fixed_base.mul_bucket(curve, sc, window=window, chunk=chunk, inv_chunk=inv_chunk,
                                                fermat_window=fermat_window)
            else:
                outs[i] = fixed_base.mul_affine(curve, sc, window=window, chunk=chunk, inv_chunk=inv_chunk,
                                                fermat_window=fermat_window)
            if bar is not None:
                jax.block_until_ready(outs[i])
                bar.update(1)
        return outs[i]

    result, pos = [], 0
    try:
        for size in sizes:
            pieces, lo, hi = [], pos, pos + size
            for i in range(lo // chunk, -(-hi // chunk)):
                a, b = max(lo, starts[i]) - starts[i], min(hi, starts[i] + chunk) - starts[i]
                pieces.append(_points(chunk_out(i), a, b))
                if starts[i] + chunk <= hi:
                    outs.pop(i, None)  # fully consumed
            if not pieces:
                result.append(curve.affine_identity((0,)))
            elif len(pieces) == 1:
                result.append(pieces[0])
            else:  # written into one preallocated buffer, in place where the platform donates buffers
                buf, at = _query_buffer(curve, size), 0
                for piece in pieces:
                    buf = _write_at(jax.default_backend())(buf, piece, at)
                    at += int(piece.inf.shape[-1])
                result.append(buf)
            pos = hi
    finally:
        if bar is not None:
            bar.close()
    return result


def _await_compile(compiling: dict, *names: str) -> None:
    """Wait for the named compiles (a program's first call would otherwise compile it a second time); a failure is
    logged and left to that call to report. ``column_sums`` stands for every compile whose name starts so."""
    for name in names:
        for key in [k for k in compiling if k == name or k.startswith(name + "_")]:
            error = compiling[key].exception()
            if error is not None:
                log.warning("compiling the setup's %s program ahead failed: %s", key, error)


def development_setup(r1cs, toxic: ToxicWaste | None = None, *, insecure_seed_for_tests: int | None = None,
                      progress=None, window: int | None = None, chunk: int | None = None,
                      inv_chunk: int | None = None, fermat_window: int | None = None,
                      scalar_chunk: int | None = None, points: str | None = None,
                      precompile: bool | None = None, timings: dict | None = None,
                      h_form: str = DEFAULT_H_FORM) -> ProvingKey:
    """A DEVELOPMENT Groth16 setup computed on the device: same key as :func:`setup` for the same toxic waste.

    "Development": one party knows the toxic waste while this runs (no ceremony); it comes from the OS CSPRNG
    (``secrets``) and is dropped on return, unless ``toxic`` is given or ``insecure_seed_for_tests`` derives it
    (:func:`insecure_toxic_waste_for_tests`: forgeable by anyone who knows the seed).

    Steps, each a device array program over static chunks (:mod:`cuzk_jax.ops.setup_scalars`; nothing per
    constraint or point in Python): Lagrange basis ``L_j(tau)`` over the rows; the column sums
    ``u_i, v_i, w_i`` as scatter-adds over the CSR nonzeros of A, B, C (with bellman's input constraints
    appended); the query scalars (``l``, ``ic``, H's: ``h_form`` as in :func:`setup`, ``tau^i Z(tau) / delta`` or
    the odd points' ``L^(2n)_(2i+1)(tau) / delta`` by the Lagrange program) in canonical form; then one batch-
    affine fixed-base run per group (:func:`cuzk_jax.ops.fixed_base.mul_affine`: ``window`` bits, ``chunk``
    scalars per call, ``inv_chunk`` its inversion run length, ``fermat_window`` the window of the inversions'
    exponentiation; None = that module's defaults; ``points``: ``"affine"``, ``"bucket"`` (the bucket method on
    the MSM's Pallas kernel) or ``"jacobian"`` for both groups -- same key whichever; None:
    :func:`default_fixed_base` per group). ``scalar_chunk``: elements per call of the scalar programs
    (default ``min(domain, 2^22)``; the Lagrange basis: ``min(domain, LAGRANGE_CHUNK)``, a few calls at a sector's
    domain). The key's queries stay on the device (a prover can use them without a host
    round trip); only the verifying key and the two fixed proving-key points come to the host. ``precompile``
    (default: on an accelerator): every program of the setup is compiled ahead, in background threads, instead of
    one after the other at its first use -- the scalar programs (:func:`cuzk_jax.ops.setup_scalars.compile_jobs`),
    each awaited before its phase, and the bucket method's programs of both groups
    (:func:`cuzk_jax.ops.fixed_base.precompile_bucket`), which compile while the scalars are computed.
    ``timings``: a dict that receives each phase's seconds -- ``scalars_lagrange``, ``scalars_column_sums``,
    ``scalars_query``, ``scalars_h`` (the scalar programs, each waited for), ``g1_points``, ``g2_points`` and
    ``total`` -- and, when compiling ahead, ``compile_s``: each program's compile seconds by name (in threads,
    overlapping the phases).
    """
    from cuzk_jax.ops import r1cs as ops_r1cs
    from cuzk_jax.ops import setup_scalars as S

    check_h_form(h_form)
    if getattr(r1cs, "tiling", None) is None:  # a tiled one is evaluated block by block (pipeline: tiled)
        ops_r1cs.check_indexable(r1cs)  # a key the prover cannot use fails here, not after the setup
    install_compile_hint()
    t0 = time.perf_counter()
    if toxic is None:
        toxic = (insecure_toxic_waste_for_tests(insecure_seed_for_tests) if insecure_seed_for_tests is not None
                 else random_toxic_waste())
    # the QAP is r1cs with bellman's input constraints appended (R1CS.with_input_rows); they go into the column
    # sums as extra nonzeros, without a copy of the whole R1CS
    m0, num_inputs, num_aux = r1cs.num_constraints, r1cs.num_inputs, r1cs.num_aux
    m = m0 + num_inputs
    n = ref.domain_size(m)
    num_vars = num_inputs + num_aux
    zt = (pow(toxic.tau, n, R) - 1) % R
    if zt == 0:
        raise ValueError("tau lies in the evaluation domain; draw new toxic waste")
    ginv, dinv = pow(toxic.gamma, R - 2, R), pow(toxic.delta, R - 2, R)
    sc = scalar_chunk or min(_next_pow2(n), 1 << 22)
    # the Lagrange basis in a few large calls, not many small ones: each call is ~500 dependent small steps (the batch
    # inversion's two 64-step scans and its Fermat chain), so its time is launch latency, not arithmetic -- 32 calls
    # took 44.5 s of a 2^27 setup on the H200 while the sector op's 16 witness workers kept the host busy (session
    # 24), about what 16 calls took at 2^26 (session 19)
    lc = scalar_chunk or min(_next_pow2(m), LAGRANGE_CHUNK)
    log.info("device setup: %d constraints, domain 2^%d, %d vars", r1cs.num_constraints, n.bit_length() - 1,
             num_vars)

    def const(v):
        return jnp.asarray(S.mont_limbs([v]))

    p1, p2 = (points or default_fixed_base("g1"), points or default_fixed_base("g2"))
    # the scalar programs' host inputs (small tables and constants) first, so that their compiles can start now
    lag_lo, lag_hi, lag_a = S.power_tables(pow(7, (R - 1) // n, R), n)
    lag_lo, lag_hi = jnp.asarray(lag_lo), jnp.asarray(lag_hi)
    tau_m, k_m = const(toxic.tau), const(zt * pow(n, R - 2, R))
    lagrange_h = h_form == "lagrange"
    if lagrange_h:  # L^(2n)_(2j+1)(tau) / delta = k' g w^j / (tau - g w^j): the Lagrange program on g w^j
        z2 = (pow(toxic.tau, 2 * n, R) - 1) % R
        if z2 == 0:
            raise ValueError("tau lies in the size-2n domain; draw new toxic waste")
        h_lo, h_hi, h_a = S.power_tables(pow(7, (R - 1) // n, R), n, scale=pow(7, (R - 1) // (2 * n), R))
        h_k = const(z2 * pow(2 * n, R - 2, R) % R * dinv)
    else:
        h_lo, h_hi, h_a = S.power_tables(toxic.tau, n - 1, scale=zt * dinv)
    h_lo, h_hi = jnp.asarray(h_lo), jnp.asarray(h_hi)
    coeffs = S.scaled_coeffs(r1cs.coeffs)
    inputs = r1cs.with_input_rows(m0)  # the input rows alone
    jobs = {}
    if precompile is None:
        precompile = jax.default_backend() != "cpu"
    if precompile:  # the scalar programs first: they are needed first (and each thread takes one job)
        jobs = S.compile_jobs(
            (lag_lo, lag_hi, lag_a, tau_m, k_m), None if lagrange_h else (h_lo, h_hi, h_a), chunk=sc, lag_chunk=lc,
            lag_width=-(-m // lc) * lc,
            nnz=[len(mat.cols) + len(tail.cols) for mat, tail in zip(r1cs.matrices(), inputs)],
            num_coeffs=coeffs.shape[1], num_vars=num_vars, num_inputs=num_inputs)
        jobs.update({c.name: functools.partial(fixed_base.precompile_bucket, c, window=window, chunk=chunk,
                                               inv_chunk=inv_chunk, fermat_window=fermat_window)
                     for c, p in ((C.g1, p1), (C.g2, p2)) if p == "bucket"})
    timings = timings if timings is not None else {}
    compile_s: dict = {}
    # each program in a thread of its own (``setup-compile-*``), so they compile while the device works and a long
    # compile -- the bucket programs take minutes on a GPU -- never queues a short one behind it
    compiling = compile_in_threads(jobs, "setup-compile", compile_s)

    _await_compile(compiling, "lagrange")
    with _phase("device scalars: Lagrange basis", progress, timings, "scalars_lagrange"):
        lag = [S.lagrange(lag_lo, lag_hi, s, tau_m, k_m, chunk=lc, a=lag_a) for s in range(0, m, lc)]
        lag = jax.block_until_ready(lag[0] if len(lag) == 1 else jnp.concatenate(lag, axis=1))
    _await_compile(compiling, "column_sums", "finish_sums")
    with _phase("device scalars: column sums", progress, timings, "scalars_column_sums"):
        u, v, w = jax.block_until_ready(tuple(
            S.column_sums(lag, None, mat.cols, mat.coeff_ids, coeffs, num_vars, indptr=mat.indptr,
                          extra=(m0 + tail.row_ids(), tail.cols, tail.coeff_ids))
            for mat, tail in zip(r1cs.matrices(), inputs)))
        del lag
    _await_compile(compiling, "query")
    with _phase("device scalars: query scalars", progress, timings, "scalars_query"):
        a_s, b_s, l_s, ic_s = jax.block_until_ready(S.query_scalars(
            u, v, w, const(toxic.alpha), const(toxic.beta), const(ginv), const(dinv), num_inputs=num_inputs,
            chunk=sc))
        del u, v, w
    _await_compile(compiling, "h_powers", "from_mont")
    with _phase(f"device scalars: H ({h_form})", progress, timings, "scalars_h"):
        if lagrange_h:  # the Lagrange program's chunk (few large calls, see lc); the same compiled program
            h_s = [S.from_mont(S.lagrange(h_lo, h_hi, s, tau_m, h_k, chunk=lc, a=h_a)) for s in range(0, n, lc)]
        else:
            h_s = [S.from_mont(S.powers(h_lo, h_hi, s, chunk=sc, a=h_a)) for s in range(0, n - 1, sc)]
        nh = n if lagrange_h else n - 1
        h_s = jax.block_until_ready((h_s[0] if len(h_s) == 1 else jnp.concatenate(h_s, axis=1))[:, :nh])
    t_scalars = time.perf_counter() - t0

    _await_compile(compiling, "g1")
    n_g1 = 2 * num_vars + nh + num_aux + num_inputs
    with _phase(f"{n_g1} G1 points ({p1} fixed-base)", progress, timings,
                "g1_points"):
        a_q, b1_q, h_q, l_q, ic_q = _sparse_fixed_base_queries(C.g1, [a_s, b_s, h_s, l_s, ic_s], window, chunk,
                                                           inv_chunk, fermat_window, p1)
        jax.block_until_ready((a_q, b1_q, h_q, l_q, ic_q))
    t_g1 = time.perf_counter() - t0 - t_scalars
    del a_s, h_s, l_s, ic_s
    _await_compile(compiling, "g2")
    with _phase(f"{num_vars} G2 points ({p2} fixed-base)", progress, timings, "g2_points"):
        (b2_q,) = _sparse_fixed_base_queries(C.g2, [b_s], window, chunk, inv_chunk, fermat_window, p2)
        jax.block_until_ready(b2_q)
    t_g2 = time.perf_counter() - t0 - t_scalars - t_g1

    g1, g2 = C.g1.ref, C.g2.ref
    vk = VerifyingKey(alpha_g1=g1.mul(g1.generator, toxic.alpha), beta_g2=g2.mul(g2.generator, toxic.beta),
                      gamma_g2=g2.mul(g2.generator, toxic.gamma), delta_g2=g2.mul(g2.generator, toxic.delta),
                      ic=host_curve.affine_from_device(C.g1, ic_q))
    pk = ProvingKey(vk=vk, beta_g1=g1.mul(g1.generator, toxic.beta), delta_g1=g1.mul(g1.generator, toxic.delta),
                    a_query=a_q, b_g1_query=b1_q, b_g2_query=b2_q, h_query=h_q, l_query=l_q,
                    num_inputs=num_inputs, num_aux=num_aux, domain_size=n, circuit_digest=r1cs.digest(),
                    h_form=h_form)
    timings["total"] = round(time.perf_counter() - t0, 3)
    if compile_s:
        timings["compile_s"] = dict(sorted(compile_s.items()))
    parts = ", ".join(f"{k[len('scalars_'):]} {timings[k]:.1f}s" for k in
                      ("scalars_lagrange", "scalars_column_sums", "scalars_query", "scalars_h"))
    msg = (f"device setup: {r1cs.num_constraints} constraints, domain 2^{n.bit_length() - 1}, {num_vars} vars: "
           f"scalars {t_scalars:.1f}s ({parts}), {n_g1} G1 points {t_g1:.1f}s, {num_vars} G2 points {t_g2:.1f}s, "
           f"total {timings['total']:.1f}s")
    log.info("%s", msg)
    if progress:
        progress("  " + msg)
    return pk
