#!/usr/bin/env bash
# Prepares a machine without a CUDA toolkit to build the cuda-tagged code:
# fetches cuda.h and the libcuda.so link stub from the distribution's
# nvidia-cuda-dev package into a cache directory, once, through a private apt
# configuration (the machine's own sources are not touched), and prints the
# export lines to use them:
#
#   eval "$(scripts/cuda-env.sh)"
#   go build -tags cuda ./...
#
# Debian: nvidia-cuda-dev from component non-free (bookworm: CUDA 11.8).
# Ubuntu: nvidia-cuda-dev from multiverse (jammy: 11.5, noble: 12.0).
# Elsewhere, or without apt-get and dpkg-deb: install a CUDA toolkit 12 or
# older and set CUDA_HOME (its include/cuda.h and lib64/stubs/libcuda.so are
# what the build needs). Where such a toolkit is found (CUDA_HOME,
# /usr/local/cuda) it is used instead. CUDA 13's cuda.h cannot be used: it
# maps cuCtxCreate to the four-argument cuCtxCreate_v4, which
# gorgonia.org/cu v0.9.6 does not compile against.
set -euo pipefail
cache=${FP8ATTN_CUDA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fp8attn-cuda}
need() { echo "cuda-env: $*" >&2; exit 1; }

for home in ${CUDA_HOME:-} /usr/local/cuda; do
  h="$home/include/cuda.h"
  if [ -f "$h" ]; then
    ver=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$h")
    if [ -n "$ver" ] && [ "$ver" -lt 13000 ]; then
      echo "export CGO_CFLAGS=\"-I$home/include\" CGO_LDFLAGS=\"-L$home/lib64/stubs -L$home/lib64\""
      exit 0
    fi
    echo "cuda-env: $h is CUDA $ver (>= 13): not usable with gorgonia.org/cu v0.9.6; trying the distribution's package" >&2
  fi
done

if [ ! -f "$cache/include/cuda.h" ] || [ ! -f "$cache/stubs/libcuda.so" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null ||
    need "needs apt-get and dpkg-deb (Debian or Ubuntu), or CUDA_HOME set to a CUDA toolkit <= 12 with include/cuda.h and lib64/stubs/libcuda.so"
  [ -r /etc/os-release ] || need "cannot read /etc/os-release to pick the package source; set CUDA_HOME instead"
  . /etc/os-release
  case " ${ID:-} ${ID_LIKE:-} " in
    *" ubuntu "*) source="deb http://archive.ubuntu.com/ubuntu ${UBUNTU_CODENAME:-${VERSION_CODENAME:-}} multiverse" ;;
    *" debian "*) source="deb http://deb.debian.org/debian ${VERSION_CODENAME:-bookworm} main contrib non-free non-free-firmware" ;;
    *) need "unknown distribution '${ID:-}': set CUDA_HOME to a CUDA toolkit <= 12" ;;
  esac
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/deb"
  echo "$source" > "$work/sources.list"
  opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=-"
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
        -o "Dir::State::Status=/var/lib/dpkg/status" -o "Debug::NoLocking=1" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" -qq update >&2 || need "apt-get update from '$source' failed"
  (cd "$work/deb" && apt-get "${opts[@]}" -qq download nvidia-cuda-dev >&2) ||
    need "could not download nvidia-cuda-dev from '$source'"
  dpkg-deb -x "$work"/deb/nvidia-cuda-dev_*.deb "$work/full" >&2
  hdr=$(find "$work/full" -name cuda.h -path '*include*' | head -1)
  stub=$(find "$work/full" -name libcuda.so -path '*stubs*' | head -1)
  [ -n "$hdr" ] && [ -n "$stub" ] || need "nvidia-cuda-dev from '$source' lacks cuda.h or stubs/libcuda.so"
  mkdir -p "$cache/include" "$cache/stubs"
  cp "$hdr" "$cache/include/"
  cp "$stub" "$cache/stubs/"
fi
ver=$(sed -n 's/^#define CUDA_VERSION \([0-9]*\).*/\1/p' "$cache/include/cuda.h")
[ -n "$ver" ] && [ "$ver" -lt 13000 ] || need "$cache/include/cuda.h is CUDA ${ver:-unknown}: need 12 or older"
echo "export CGO_CFLAGS=\"-I$cache/include\" CGO_LDFLAGS=\"-L$cache/stubs\""
