#!/usr/bin/env bash
# Prepares an nvcc that builds the Hopper module (sm_90a: wgmma,
# setmaxnreg) on a machine without a GPU or a CUDA toolkit, and prints its
# path:
#
#   NVCC=$(scripts/nvcc-local.sh)
#   (cd backend/cuda/kernels && $NVCC -O3 -std=c++17 -cubin \
#     -gencode=arch=compute_90a,code=sm_90a -o /tmp/a.cubin attention_sm90a.cu)
#
# It fetches CUDA 12.4 from Debian 13 (trixie) non-free, nvidia-cuda-toolkit
# (nvcc, ptxas, cicc), nvidia-cuda-dev (the headers) and libnvvm4, with
# libcu++-dev (the headers' <nv/target>), through a private apt
# configuration (the machine's own sources are not touched), unpacks them
# with dpkg-deb into a cache directory, once (about 1 GB downloaded), and
# lays out a toolkit prefix there. Such a build checks that the sources
# compile and what ptxas makes of them (registers, spills), and its cubin
# can be tried on a GPU through FP8ATTN_CUBIN (a kernel development build)
# for the tests and the mutants, not for timings: CUDA 12.4's ptxas (and
# 12.5's) serializes every wgmma of stage 9 (info C7515: a wait after each
# QGMMA), which CUDA 13.0's does not. The modules the repository embeds
# stay gen.sh's, built by the GPU machine's nvcc. Needs apt-get and dpkg-deb, and a
# host g++ that CUDA 12.4 takes (up to 13).
set -euo pipefail
cache=${FP8ATTN_NVCC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fp8attn-nvcc}
prefix=$cache/cuda-12.4
need() { echo "nvcc-local: $*" >&2; exit 1; }

if [ ! -x "$prefix/bin/nvcc" ]; then
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || need "needs apt-get and dpkg-deb"
  source="deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main contrib non-free"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/lists/partial" "$work/archives/partial" "$work/deb" "$work/root"
  echo "$source" > "$work/sources.list"
  opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=-"
        -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::Archives=$work/archives"
        -o "Dir::State::Status=/var/lib/dpkg/status" -o "Debug::NoLocking=1" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" -qq update >&2 || need "apt-get update from '$source' failed"
  (cd "$work/deb" && apt-get "${opts[@]}" -qq download nvidia-cuda-toolkit nvidia-cuda-dev libnvvm4 libcu++-dev >&2) ||
    need "could not download the toolkit's packages from '$source'"
  for d in "$work"/deb/*.deb; do dpkg-deb -x "$d" "$work/root"; done
  r=$work/root
  [ -x "$r/usr/lib/nvidia-cuda-toolkit/bin/nvcc" ] && [ -x "$r/usr/bin/ptxas" ] || need "the packages lack nvcc or ptxas"
  rm -rf "$prefix"
  mkdir -p "$prefix/bin" "$prefix/nvvm/bin" "$prefix/nvvm/libdevice" "$prefix/nvvm/lib64"
  cp -a "$r/usr/lib/nvidia-cuda-toolkit/bin/nvcc" "$r/usr/lib/nvidia-cuda-toolkit/bin/crt" "$prefix/bin/"
  for b in ptxas fatbinary nvlink cudafe++ bin2c cuobjdump nvdisasm cu++filt; do cp -a "$r/usr/bin/$b" "$prefix/bin/"; done
  cp -a "$r/usr/lib/nvidia-cuda-toolkit/bin/cicc" "$prefix/nvvm/bin/"
  cp -a "$r"/usr/lib/nvidia-cuda-toolkit/libdevice/* "$prefix/nvvm/libdevice/"
  cp -a "$r"/usr/lib/x86_64-linux-gnu/libnvvm.so* "$prefix/nvvm/lib64/"
  cp -a "$r/usr/include" "$prefix/include"
  cat > "$prefix/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/nvvm/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
CICC_PATH        = $(TOP)/nvvm/bin
EOF
fi
"$prefix/bin/nvcc" --version >/dev/null || need "$prefix/bin/nvcc does not run"
echo "$prefix/bin/nvcc"
