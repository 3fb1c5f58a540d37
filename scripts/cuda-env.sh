#!/usr/bin/env bash
# Prepares a machine without a CUDA toolkit to build the cuda-tagged code:
# fetches cuda.h and the libcuda.so link stub from Debian's nvidia-cuda-dev
# (CUDA 11.8, component non-free) into a cache directory, once, through a
# private apt configuration (the machine's own sources are not touched), and
# prints the export lines to use them:
#
#   eval "$(scripts/cuda-env.sh)"
#   go build -tags cuda ./...
#
# Where a CUDA toolkit <= 12 is installed (nvcc and cuda.h under
# $CUDA_HOME, /usr/local/cuda) it is used instead. CUDA 13's cuda.h cannot
# be used: it maps cuCtxCreate to the four-argument cuCtxCreate_v4, which
# gorgonia.org/cu v0.9.6 does not compile against.
set -euo pipefail
cache=${FP8ATTN_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fp8attn-cuda}

for home in ${CUDA_HOME:-} /usr/local/cuda; do
  h="$home/include/cuda.h"
  if [ -f "$h" ]; then
    ver=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$h")
    if [ -n "$ver" ] && [ "$ver" -lt 13000 ]; then
      echo "export CGO_CFLAGS=\"-I$home/include\" CGO_LDFLAGS=\"-L$home/lib64/stubs -L$home/lib64\""
      exit 0
    fi
    echo "cuda-env: $h is CUDA $ver (>= 13): not usable with gorgonia.org/cu v0.9.6; using Debian's 11.8 headers" >&2
  fi
done

if [ ! -f "$cache/usr/include/cuda.h" ] || [ ! -f "$cache/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" ]; then
  mkdir -p "$cache/apt/lists/partial" "$cache/apt/archives/partial" "$cache/deb"
  . /etc/os-release
  codename=${VERSION_CODENAME:-bookworm}
  echo "deb http://deb.debian.org/debian $codename main contrib non-free non-free-firmware" > "$cache/apt/sources.list"
  opts=(-o "Dir::Etc::SourceList=$cache/apt/sources.list" -o "Dir::Etc::SourceParts=-"
        -o "Dir::State::Lists=$cache/apt/lists" -o "Dir::Cache::Archives=$cache/apt/archives"
        -o "Dir::State::Status=/var/lib/dpkg/status" -o "Debug::NoLocking=1")
  apt-get "${opts[@]}" -o APT::Sandbox::User=root -qq update >&2
  (cd "$cache/deb" && apt-get "${opts[@]}" -o APT::Sandbox::User=root -qq download nvidia-cuda-dev >&2)
  dpkg-deb -x "$cache"/deb/nvidia-cuda-dev_*.deb "$cache/full" >&2
  mkdir -p "$cache/usr/include" "$cache/usr/lib/x86_64-linux-gnu/stubs"
  cp "$cache/full/usr/include/cuda.h" "$cache/usr/include/"
  cp "$cache"/full/usr/lib/x86_64-linux-gnu/stubs/libcuda.so "$cache/usr/lib/x86_64-linux-gnu/stubs/"
  rm -rf "$cache/full" "$cache/deb" "$cache/apt"
fi
echo "export CGO_CFLAGS=\"-I$cache/usr/include\" CGO_LDFLAGS=\"-L$cache/usr/lib/x86_64-linux-gnu/stubs\""
