# syntax=docker/dockerfile:1
# Three images from one file; pick one with --target (cloudbuild.yaml builds all three):
#   docker build --target gpu -t seqcls-gpu .      # NVIDIA GPUs, one node or many
#   docker build --target tpu -t seqcls-tpu .      # one Cloud TPU host (v2-8, v3-8, v5e-8)
#   docker build --target serve -t seqcls-serve .  # seqcls serve: Vertex AI prediction, CPU or GPU
# The entrypoint of gpu and tpu is seqcls, so a container's arguments are seqcls arguments:
#   docker run --gpus all seqcls-gpu fit --config configs/data/glue/rte.yaml --config configs/trainer/gpu.yaml
# That of serve is seqcls serve (docs/serving.md):
#   docker run -p 8080:8080 -v "$PWD/runs/quickstart/model:/model" seqcls-serve /model --host 0.0.0.0
# Dependencies are installed before the source is copied: editing src/ rebuilds one small layer.

# ---------------------------------------------------------------------------------------------
# gpu: the official PyTorch image with CUDA 12.6. PyTorch's CUDA 12.6 builds are the ones that
# still carry kernels for every GPU Vertex AI offers with this image: V100 (sm_70), T4 (sm_75),
# A100 (sm_80), L4 (sm_89, runs the sm_86 kernels) and H100 (sm_90). The CUDA 12.8 builds
# dropped V100 from torch 2.11 on, and CUDA 13 drops it altogether.
# ---------------------------------------------------------------------------------------------
FROM pytorch/pytorch:2.10.0-cuda12.6-cudnn9-runtime AS gpu

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_DISABLE_TELEMETRY=1

# Reduction Server's NCCL transport plugin, from Google's apt repository. Without it NCCL never
# talks to the reducers that train-cloud-gpu.sh --reduction-server adds, and they sit idle.
# Apt versions stay unpinned (DL3008): the plugin must match the Reduction Server image, which
# Google publishes only as :latest, and ca-certificates should be current.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && python -c "import urllib.request as r; r.urlretrieve('https://packages.cloud.google.com/apt/doc/apt-key.gpg', '/usr/share/keyrings/google-cloud.asc')" \
 && echo "deb [signed-by=/usr/share/keyrings/google-cloud.asc] https://packages.cloud.google.com/apt google-fast-socket main" \
      > /etc/apt/sources.list.d/google-fast-socket.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends google-reduction-server \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml constraints.txt docker/requirements.py ./
RUN python requirements.py gpu /tmp/deps \
 && pip install -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
 && rm -rf /tmp/deps

COPY README.md ./
COPY src ./src
COPY configs ./configs
RUN pip install --no-deps . \
 && useradd --create-home --uid 1000 seqcls \
 && chown seqcls /app

# The seqcls user, by uid so that a runAsNonRoot check can see it is not root. Runs that are
# not sent to gs:// write under /app/runs; caches go to /home/seqcls/.cache.
USER 1000
ENTRYPOINT ["seqcls"]
CMD ["--help"]

# ---------------------------------------------------------------------------------------------
# tpu: slim Python with torch 2.9.0 and torch_xla 2.9.0, the newest pair (torch_xla needs
# exactly its own torch). The CPU build of torch comes from PyTorch's index: the PyPI build
# drags in about 4 GB of CUDA libraries that a TPU never uses. Both builds are torch 2.9.0.
# ---------------------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm AS tpu

ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    PJRT_DEVICE=TPU

WORKDIR /app
COPY pyproject.toml constraints.txt docker/requirements.py ./
RUN python requirements.py tpu /tmp/deps \
 && pip install --extra-index-url "$TORCH_INDEX_URL" \
      -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
 && rm -rf /tmp/deps

COPY README.md ./
COPY src ./src
COPY configs ./configs
RUN pip install --no-deps .

# The TPU image stays root: libtpu opens the TPU chips (/dev/accel*, /dev/vfio) directly, and
# on a TPU VM those device files belong to root.
ENTRYPOINT ["seqcls"]
CMD ["--help"]

# ---------------------------------------------------------------------------------------------
# serve: the gpu image plus the serve extra (ONNX Runtime, FastAPI, uvicorn), running
# seqcls serve. One image for both kinds of prediction machine: PyTorch takes the GPU where the
# machine has one; ONNX Runtime (--backend onnx) runs on the CPU. Vertex AI sets AIP_HTTP_PORT,
# the routes and AIP_STORAGE_URI (the model's copy), which seqcls serve reads; a container
# listens on every interface for Vertex AI's health checks to reach it.
# ---------------------------------------------------------------------------------------------
FROM gpu AS serve

USER 0
RUN python requirements.py serve /tmp/deps \
 && pip install -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
 && rm -rf /tmp/deps
USER 1000
EXPOSE 8080
ENTRYPOINT ["seqcls", "serve"]
CMD ["--host", "0.0.0.0"]
