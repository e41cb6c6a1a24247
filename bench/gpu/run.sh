#!/bin/bash
# One benchmark step on a lent GPU machine (the project's device runs; BUILD.md "Running on a GPU").
#
#   bash bench/gpu/run.sh NAME SECONDS [bench.py flags...]
#
# Installs the carried wheels (.whl/, e.g. py_arkworks_bls12381) and this tree, then runs
# `scripts/bench.py FLAGS --out=$OUT/NAME.json` under `timeout SECONDS`, the whole log in $OUT/NAME.log and the
# lines without compile chatter on stdout, the "compiled X in t s" lines summarised at the end. The XLA cache
# (.jaxcache/) and the compiled circuits (.circuits/) live in ignored folders of the tree: they stay on a warm
# machine between calls. $OUT/xla.tgz.partNN: the XLA cache as a tarball cut in parts of < 15 MB (a file back from
# the device may be 16 MiB, at most 8 of them; a cache of more than XLA_PARTS parts stays behind), to keep in the
# ignored .xlagpu/ here and unpack before a call on a fresh machine: `cat .xlagpu/xla.tgz.part* | tar xz -C
# .jaxcache` (carry .xlagpu).
# Environment: CUZK_BENCH_COMMIT from .commit (a copied tree has no git metadata), XLA_PYTHON_CLIENT_MEM_FRACTION
# (default 0.95 here: the sector runs need the memory).
set -u
name=$1; secs=$2; shift 2
out=${OUT:-/tmp/out}; mkdir -p "$out"
if compgen -G ".whl/*.whl" >/dev/null; then python3 -m pip install -q --no-deps --no-index --no-compile .whl/*.whl >/dev/null 2>&1; fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1
export PYTHONUNBUFFERED=1 CUZK_BENCH_COMMIT=$(cat .commit 2>/dev/null || echo unknown)
export XLA_PYTHON_CLIENT_MEM_FRACTION=${XLA_PYTHON_CLIENT_MEM_FRACTION:-0.95}
export CUZK_JAX_CIRCUIT_DIR=$PWD/.circuits
cache=$PWD/.jaxcache; mkdir -p "$cache" .circuits
echo "== $name: $(ls "$cache" | wc -l) cached programs, $(du -sh .circuits | cut -f1) of circuits; $(date -u +%T)"
timeout "$secs" python3 scripts/bench.py "$@" --cache_dir="$cache" --verbosity=0 --out="$out/$name.json" 2>&1 \
  | tee "$out/$name.log" | grep -v "compiled \|Compil\|^[IW][0-9]"
echo "== $name: rc=${PIPESTATUS[0]} at $(date -u +%T); slowest compiles:"
grep -o "compiled .* in [0-9.]* s" "$out/$name.log" | sort -t' ' -k4 -g | tail -8
rm -f "$out"/xla.tgz*
(cd "$cache" && tar czf "$out/xla.tgz" .) && split -b 15000000 -d "$out/xla.tgz" "$out/xla.tgz.part" && rm -f "$out/xla.tgz"
parts=$(ls "$out"/xla.tgz.part* 2>/dev/null | wc -l)
if [ "$parts" -gt "${XLA_PARTS:-4}" ]; then rm -f "$out"/xla.tgz.part*; echo "== XLA cache: $parts parts, not returned"; fi
