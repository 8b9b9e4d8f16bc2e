#!/usr/bin/env bash
# Build and install Filebench (the reference of bench/workload_parity.py) from a source tree:
# no distribution packages it, and a bench machine may reach only package registries, so the
# source comes from wherever you have it (a git clone or a release tarball, unpacked).
#
#   sudo bench/build_filebench.sh SRC_DIR [PREFIX]      # PREFIX default /usr/local
#
# Installs its build tools with apt-get (autoconf automake libtool flex bison), builds in a
# scratch copy (SRC_DIR is left as it was), installs `filebench` and its workloads under PREFIX.
# Filebench 1.5-alpha3 predates GCC 10's -fno-common default, hence -fcommon.
# Running it wants ASLR off for its processes: bench/workload_parity.py runs it under setarch -R
# (the machine-wide setting stays as it is) and finds it under PREFIX with --filebench-prefix.
set -euo pipefail
src=${1:?usage: build_filebench.sh SRC_DIR [PREFIX]}
prefix=${2:-/usr/local}
[ -f "$src/configure.ac" ] || { echo "build_filebench: $src has no configure.ac (not a Filebench source tree)" >&2; exit 2; }
need=()
for tool in autoreconf automake libtoolize flex bison make cc; do
    command -v "$tool" >/dev/null || need+=("$tool")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing build tools (missing: ${need[*]})"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq autoconf automake libtool flex bison make gcc >/dev/null
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -a "$src/." "$work/"
cd "$work"
autoreconf -fi >/dev/null 2>&1 || { libtoolize && aclocal && autoheader && automake --add-missing && autoconf; }
./configure --prefix="$prefix" CFLAGS="-O2 -fcommon" >/dev/null
make -j"$(nproc)" >/dev/null
make install >/dev/null
echo "installed $("$prefix/bin/filebench" -h 2>&1 | head -1 || true) -> $prefix/bin/filebench"
