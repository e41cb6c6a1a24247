"""Configuration of the ops layer: frozen, hashable config types passed to jit as static arguments.

Everything that changes a compiled ops program is a field of one of these types (or a static shape argument), so it
is part of the jit cache key: two configurations never share a compiled program. The kernel choice per platform
happens in ONE place, the ``default(platform)`` class methods; ``parse(text)`` is the one grammar that turns a CLI
string into a config (``str(config)`` gives it back).

Grammar: ``KERNEL[:key=value]*``, e.g. ``"xla"``, ``"pallas"``, ``"pallas_interpret:block=8:seg=8:acc_seg=8"``.
Unknown kernels, keys or values raise ``ValueError`` naming the bad token.

The field multiplication schedule is not a config of its own: field and curve objects carry it
(:meth:`cuzk_jax.ops.field.PrimeField.with_schedule`, :meth:`cuzk_jax.ops.curve.Curve.with_schedule`);
:func:`default_schedule` is the platform default that ``ops.field.fq`` / ``fr`` / ``fq2`` use.
"""

from __future__ import annotations

import dataclasses

import jax

SCHEDULES = ("unrolled", "rolled")
KERNELS = ("xla", "pallas", "pallas_interpret")
# MsmConfig.dbl_branch=None per group: the level-1 mixed addition without its doubling case won for G1 and lost
# narrowly for G2 on the H200 (bench/results/RESULTS.md, session 21)
DBL_BRANCH_DEFAULT = {"g1": 1, "g2": 0}


def platform_of(platform: str | None = None) -> str:
    """``platform`` or, for ``None``, ``jax.default_backend()`` (``"cpu"``, ``"gpu"``, ``"tpu"``)."""
    return platform or jax.default_backend()


def default_schedule(platform: str | None = None) -> str:
    """The field multiplication schedule for ``platform``: ``"rolled"`` on CPU (XLA:CPU compiles the straight-line
    CIOS slowly), ``"unrolled"`` elsewhere. A function of the platform only, never of mutable state."""
    return "rolled" if platform_of(platform) == "cpu" else "unrolled"


def _int(key: str, val: str, text: str) -> int:
    if not val.isdigit() or int(val) <= 0:
        raise ValueError(f"bad value in {key}={val!r} of {text!r}: expected a positive integer")
    return int(val)


def _split(text: str, cls_name: str) -> tuple[str, list[tuple[str, str]]]:
    kernel, *opts = str(text).strip().split(":")
    if kernel not in KERNELS:
        raise ValueError(f"unknown {cls_name} kernel {kernel!r} in {text!r}; expected one of {KERNELS}")
    pairs = []
    for o in opts:
        key, eq, val = o.partition("=")
        if not eq or not val:
            raise ValueError(f"bad {cls_name} option {o!r} in {text!r}: expected key=value")
        pairs.append((key, val))
    return kernel, pairs


def _format(cfg) -> str:
    parts = [cfg.kernel]
    for f in dataclasses.fields(cfg):
        if f.name == "kernel":
            continue
        v = getattr(cfg, f.name)
        if v != f.default:
            parts.append(f"{f.name}={v}")
    return ":".join(parts)


@dataclasses.dataclass(frozen=True)
class MsmConfig:
    """How :mod:`cuzk_jax.ops.msm` / :mod:`cuzk_jax.ops.msm_precomputed` run the bucket phase (steps 4-6).

    ``kernel``: ``"xla"`` -- the portable step machine (one XYZZ addition per loop step, rolled multiplication);
    ``"pallas"`` -- the Pallas/Triton kernels of :mod:`cuzk_jax.ops.pallas.bucket` with PTX carry-chain field
    blocks (GPU only); ``"pallas_interpret"`` -- the same kernels under the Pallas interpreter with the jnp field
    (the CPU test twin of ``"pallas"``: same function).
    ``block``: lanes per kernel program (Pallas; None: ``ops.msm.pallas_block`` of the pass's pair count).
    ``warps``: Triton warps per program (Pallas; None: ``max(1, block // 32)``).
    ``seg``: pairs per lane in the level-1 accumulation kernel (Pallas; None: ``ops.msm.pallas_seg``).
    ``acc_seg``: entries per lane in the later accumulation levels (Pallas).
    ``stages``: a measurement knob (Pallas): run kernel 1 and only the first ``stages`` of the 5 later stages, to
    time an MSM's phases; with ``stages < 5`` the result is NOT the MSM.
    ``max_pairs``: the most (bucket, point) pairs of one accumulation pass of the plain and the split MSM (both
    kernels; not the window-table MSM; None: the functions' default, :data:`cuzk_jax.ops.msm.DEFAULT_MAX_PAIRS`).
    Partitions beyond it run in groups and long point ranges in chunks; a smaller value shrinks the pass's bucket
    arrays (device memory) for more passes.
    ``dbl_branch``: ``1``: the level-1 kernel's mixed addition leaves out its doubling case (10 products instead of
    the unified form's 11: ``X1^2`` is only needed when a point meets itself in a bucket) and computes a doubling
    in a branch taken when any lane of the program needs one; ``0``: the unified formula; ``None`` (default): the
    group's winner on the H200 (:data:`DBL_BRANCH_DEFAULT`: on for G1, off for G2). Same results either way.
    The XLA kernel reads none of the other Pallas fields.
    """

    kernel: str = "xla"
    block: int | None = None
    warps: int | None = None
    seg: int | None = None
    acc_seg: int = 16
    stages: int = 5
    max_pairs: int | None = None
    dbl_branch: int | None = None

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown MsmConfig kernel {self.kernel!r}; expected one of {KERNELS}")
        for name in ("block", "warps", "seg", "max_pairs"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or v <= 0):
                raise ValueError(f"MsmConfig.{name} must be a positive int or None, got {v!r}")
        if self.block is not None and self.block & (self.block - 1):
            raise ValueError(f"MsmConfig.block must be a power of two, got {self.block}")
        if not isinstance(self.acc_seg, int) or self.acc_seg <= 0:
            raise ValueError(f"MsmConfig.acc_seg must be a positive int, got {self.acc_seg!r}")
        if not isinstance(self.stages, int) or not 0 <= self.stages <= 5:
            raise ValueError(f"MsmConfig.stages must be in 0..5, got {self.stages!r}")
        if self.dbl_branch not in (None, 0, 1):
            raise ValueError(f"MsmConfig.dbl_branch must be 0, 1 or None, got {self.dbl_branch!r}")

    @classmethod
    def default(cls, platform: str | None = None) -> "MsmConfig":
        """The Pallas kernels on a GPU, the XLA step machine elsewhere (Triton kernels do not apply there)."""
        return cls("pallas") if platform_of(platform) == "gpu" else cls("xla")

    @classmethod
    def parse(cls, text: str) -> "MsmConfig":
        """``"xla"``, ``"pallas"``, ``"pallas_interpret"``, with options ``:block=B:warps=W:seg=S:acc_seg=A:
        stages=K:max_pairs=M:dbl_branch=0|1`` (positive ints unless stated)."""
        kernel, pairs = _split(text, "MsmConfig")
        keys = {f.name for f in dataclasses.fields(cls)} - {"kernel"}
        kw = {}
        for key, val in pairs:
            if key not in keys:
                raise ValueError(f"unknown MsmConfig option {key!r} in {text!r}; expected one of {sorted(keys)}")
            kw[key] = int(val) if key in ("stages", "dbl_branch") and val.isdigit() else _int(key, val, text)
        return cls(kernel, **kw)

    @classmethod
    def coerce(cls, config: "MsmConfig | str | None") -> "MsmConfig":
        """None -> :meth:`default`, a string -> :meth:`parse`, a config as is."""
        if config is None:
            return cls.default()
        if isinstance(config, str):
            return cls.parse(config)
        if not isinstance(config, cls):
            raise ValueError(f"expected an MsmConfig, got {config!r}")
        return config

    def __str__(self) -> str:
        return _format(self)


@dataclasses.dataclass(frozen=True)
class NttConfig:
    """How :mod:`cuzk_jax.ops.ntt` (and :mod:`cuzk_jax.ops.qap`) run the passes of a transform (docs/ntt.md).

    ``kernel``: ``"xla"`` -- each pass's sub-transform as constant-geometry radix-2 stages in one XLA
    ``fori_loop``; ``"pallas"`` -- each pass one Pallas/Triton kernel launch doing whole sub-transforms of a tile
    held in registers as lane arrays (:mod:`cuzk_jax.ops.pallas.ntt`, PTX carry-chain field blocks; GPU only);
    ``"pallas_interpret"`` -- that kernel under the Pallas interpreter with the rolled jnp field (the CPU test
    twin: same function).
    ``sub``: log2 of the largest sub-transform of one pass (Bailey's four-step, applied recursively: a 2^L NTT is
    ``ceil(L / sub)`` passes); None: one pass for ``xla`` (its stages run one per XLA kernel anyway), 3 for the
    Pallas kernels (8-point sub-transforms: 8 points x 8 limbs stay in registers per lane).
    ``block``: elements (points x lanes) per kernel program (Pallas; a power of two; 2048 = 256 lanes of 8 points).
    ``warps``: Triton warps per program (Pallas).
    ``schedule``: the field multiplication schedule (``"unrolled"`` / ``"rolled"``) of the XLA programs -- the
    ``"xla"`` passes and, for every kernel, the pointwise scalings and the H step's pointwise product; None:
    :func:`default_schedule` of the platform.
    ``finish``: the H step's pointwise ``A B - C`` (:mod:`cuzk_jax.ops.qap`): ``"xla"`` -- the field's XLA product
    over windows of the domain; ``"kernel"`` -- one Pallas pass over the three inputs with the PTX blocks
    (:func:`cuzk_jax.ops.pallas.field_mul.mul_sub`; Pallas kernels only); None (default): ``"kernel"`` with the
    compiled Pallas kernels (it won the split H step at 2^27 on the H200, ``bench/results/RESULTS.md`` session
    24), ``"xla"`` otherwise (the interpreter's twin stays the tests' choice). Same results either way.
    Not configurable: a natural-order transform's digit order becomes natural order by the blocked digit reversal
    (:func:`cuzk_jax.ops.ntt_network.digit_reverse`), and the H step's coset programs run their second transform as
    the passes' transposes from pass order (:mod:`cuzk_jax.ops.qap`: no reversal between the two transforms).
    """

    kernel: str = "xla"
    block: int = 2048
    warps: int = 8
    schedule: str | None = None
    sub: int | None = None
    finish: str | None = None

    def __post_init__(self):
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown NttConfig kernel {self.kernel!r}; expected one of {KERNELS}")
        if self.sub is not None and (not isinstance(self.sub, int) or not 1 <= self.sub <= 32):
            raise ValueError(f"NttConfig.sub must be an int in 1..32 or None, got {self.sub!r}")
        for name in ("block", "warps"):
            v = getattr(self, name)
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"NttConfig.{name} must be a positive int, got {v!r}")
        if self.block & (self.block - 1):
            raise ValueError(f"NttConfig.block must be a power of two, got {self.block}")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ValueError(f"unknown NttConfig schedule {self.schedule!r}; expected one of {SCHEDULES}")
        if self.finish not in (None, "xla", "kernel"):
            raise ValueError(f"NttConfig.finish must be xla or kernel, got {self.finish!r}")
        if self.finish == "kernel" and self.kernel == "xla":
            raise ValueError("NttConfig.finish=kernel needs the Pallas kernels (pallas or pallas_interpret)")

    @property
    def finish_kind(self) -> str:
        """``finish`` resolved: ``"kernel"`` or ``"xla"`` (the class docstring)."""
        if self.finish is not None:
            return self.finish
        return "kernel" if self.kernel == "pallas" else "xla"

    @classmethod
    def default(cls, platform: str | None = None) -> "NttConfig":
        """The Pallas pass kernel on a GPU (``"pallas"``: 8-point passes, 256 lanes per program, 8 warps), the XLA
        path elsewhere; the schedule of the platform (:func:`default_schedule`).

        On the H200 the kernel was exact against the host NTT; its lane-array tile with 8-point passes and a
        limb-minor twiddle table beat the earlier Stockham tile and 16-point passes at 2^20, 10 x 2^20 and 2^24
        (``bench --op=ntt``; figures in ``bench/results/RESULTS.md``); on a CPU it runs only under the Pallas
        interpreter (``"pallas_interpret"``, the tests' twin)."""
        p = platform_of(platform)
        return cls("pallas" if p == "gpu" else "xla", schedule=default_schedule(p))

    @classmethod
    def parse(cls, text: str) -> "NttConfig":
        """``"xla"``, ``"pallas"``, ``"pallas_interpret"``, with options ``:block=B:warps=W:sub=S`` (positive ints),
        ``:schedule=unrolled|rolled`` and ``:finish=xla|kernel``."""
        kernel, pairs = _split(text, "NttConfig")
        kw = {}
        for key, val in pairs:
            if key in ("block", "warps", "sub"):
                kw[key] = _int(key, val, text)
            elif key == "schedule":
                if val not in SCHEDULES:
                    raise ValueError(f"bad value in schedule={val!r} of {text!r}: expected one of {SCHEDULES}")
                kw[key] = val
            elif key == "finish":
                kw[key] = val
            else:
                raise ValueError(f"unknown NttConfig option {key!r} in {text!r}; expected block, warps, schedule, "
                                 f"sub, finish")
        return cls(kernel, **kw)

    @classmethod
    def coerce(cls, config: "NttConfig | str | None") -> "NttConfig":
        """None -> :meth:`default`, a string -> :meth:`parse`, a config as is; the schedule resolved to the
        platform's when None (so the resolved config is the jit cache key)."""
        if config is None:
            config = cls.default()
        elif isinstance(config, str):
            config = cls.parse(config)
        elif not isinstance(config, cls):
            raise ValueError(f"expected an NttConfig, got {config!r}")
        if config.schedule is None:
            config = dataclasses.replace(config, schedule=default_schedule())
        return config

    def sub_log(self) -> int:
        """``sub`` resolved: the largest sub-transform of a pass (log2) for this kernel."""
        if self.sub is not None:
            return self.sub
        return 32 if self.kernel == "xla" else 3

    def __str__(self) -> str:
        return _format(self)
