# roformer in a container: the same pinned PyTorch (its LibTorch) and the same Debian packages as
# scripts/setup.sh, which this image runs, so the versions are written in one place. A plain Debian
# base is enough for CUDA: the torch wheel brings the CUDA runtime, cuDNN and NCCL, and on a GPU host
# the NVIDIA container toolkit injects the driver (no CUDA toolkit, no CUDA base image).
#
#   docker build -t roformer .
#   docker run --gpus all -v $PWD/data:/work/data:ro -v $PWD/runs:/work/runs roformer \
#       train -c /opt/roformer/configs/base.yaml --run-dir runs/base
#
# The working directory is /work: relative paths on the command line and in a config (base.yaml
# reads data/wikitext-103/*.txt) are found under it, and a run directory there is kept on the host
# when mounted. The shipped configs are in the image at /opt/roformer/configs; a config of your own
# is mounted beside the data, e.g. `-v $PWD/my.yaml:/work/my.yaml:ro ... train -c my.yaml`.
# Podman: `--device nvidia.com/gpu=all` (CDI) in place of `--gpus all`. Checked by
# scripts/container_check.sh (builds this image with podman and runs the demo in it).
FROM debian:bookworm-slim

ENV DEBIAN_FRONTEND=noninteractive \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    ROFORMER_VENV=/opt/venv-torch \
    BUILD_DIR=/opt/roformer/build \
    PIP_NO_CACHE_DIR=1

WORKDIR /opt/roformer
COPY . /opt/roformer
# setup.sh installs the Debian packages and the pinned torch into the venv, then configures and
# builds the roformer program (its `demo` scope: no test packages). ca-certificates first: the
# system's trust store for pip's HTTPS (with a site's own CA, where a base image adds one).
# One layer, cleaned in the same step: no apt lists, no pip or ccache cache, no object files (the
# program and its Parquet plugin stay; a rebuild in the image compiles again).
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends ca-certificates \
    && CCACHE_DISABLE=1 bash scripts/setup.sh demo \
    && find "$BUILD_DIR" \( -name '*.o' -o -name '*.gch' -o -name '*.a' \) -delete \
    && rm -rf /var/lib/apt/lists/* /root/.cache
WORKDIR /work
ENTRYPOINT ["/opt/roformer/build/roformer"]
CMD ["--help"]
