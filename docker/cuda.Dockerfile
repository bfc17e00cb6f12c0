# Compile image for CUDA targets: the pinned triton (its wheel carries ptxas, cuobjdump, nvdisasm), the
# pinned nvfatbin (multi-arch fatbins), GNU binutils and the tritonforge pipeline. Kernels are compiled
# without a GPU.
ARG BASE_IMAGE=nvidia/cuda:12.8.1-devel-ubuntu24.04

FROM ${BASE_IMAGE} AS build
# Kept line for line as rocm.Dockerfile but for CUDA's nvfatbin and the labels: where both images
# start from one base (the local Debian one), the second reuses the first's layers up to those lines.
ARG DEBIAN_FRONTEND=noninteractive
# certs/ is generated in the build context from the host's CA store (pip behind TLS-intercepting
# proxies); only this stage sees it, the final image copies the venv alone.
COPY certs/ /usr/local/share/ca-certificates/tritonforge/
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
 && update-ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pins/ /src/pins/
# pins/triton.txt's release, or the one the `triton` setting asks for (the image's tag says which)
ARG TRITON_VERSION
RUN test -n "${TRITON_VERSION}" && python3 -m venv /opt/tritonforge \
 && /opt/tritonforge/bin/pip install "triton==${TRITON_VERSION}" -r /src/pins/image.txt
COPY pyproject.toml /src/
COPY pipeline/ /src/pipeline/
COPY runtime/ /src/runtime/
COPY tritonforge/ /src/tritonforge/
# pyproject names README.md as the long description; the image needs none (docs do not change the tag).
RUN touch /src/README.md && /opt/tritonforge/bin/pip install --no-deps /src
RUN /opt/tritonforge/bin/pip install -r /src/pins/fatbin.txt

FROM ${BASE_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 binutils \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 --user-group forge
COPY --from=build /opt/tritonforge /opt/tritonforge
ARG REVISION=unknown
ARG TRITON_VERSION=unknown
LABEL org.opencontainers.image.title="tritonforge-cuda" \
      org.opencontainers.image.description="Ahead-of-time Triton kernel compiler for ONNX Runtime (CUDA targets)" \
      org.opencontainers.image.revision="${REVISION}" \
      io.tritonforge.triton-version="${TRITON_VERSION}" \
      io.tritonforge.platform="cuda"
ENV PATH=/opt/tritonforge/bin:$PATH TRITON_DISABLE_LINE_INFO=1
USER 10001:10001
WORKDIR /home/forge
ENTRYPOINT ["python3", "-m", "tritonforge.pipeline.compile_dist"]
