# roformer on a CUDA machine: the same pinned PyTorch (its LibTorch) and the same Debian packages as
# scripts/setup.sh, which this image runs, so the versions are written in one place.
#   docker build -t roformer .
#   docker run --gpus all -v $PWD/runs:/work/runs roformer train -c configs/base.yaml
FROM nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04

ENV DEBIAN_FRONTEND=noninteractive \
    ROFORMER_VENV=/opt/venv-torch \
    BUILD_DIR=/opt/roformer/build
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/roformer
COPY . /opt/roformer
# Installs the Debian packages and the pinned torch into the venv, then configures and builds.
RUN bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
ENV LD_LIBRARY_PATH=/opt/venv-torch/lib/python3.12/site-packages/torch/lib
WORKDIR /work
ENTRYPOINT ["/opt/roformer/build/roformer"]
CMD ["--help"]
