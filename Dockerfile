# syntax=docker/dockerfile:1
# rfdetr-serve: `rfdetr serve` with its sidecar. Every RUN below is a script in scripts/ that the tests run
# outside Docker. The CPU image is built and smoked on the project's machines with podman (no registry there:
# scripts/image-build.sh makes the base images, scripts/image-smoke.sh runs it; SERVING.md, "Container image").
#
# CPU engine (plain Debian):
#   docker build -t rfdetr-serve:cpu .
#   docker run --rm -p 20000:20000 -v rfdetr-cache:/var/cache/rfdetr rfdetr-serve:cpu --host 0.0.0.0 --port 20000
#
# TT engine (Blackhole), without building tt-metal: the ttnn-sdk stage fetches the ttnn 0.78.0 wheel's libraries
# from PyPI and only the host headers of tt-metal's v0.78.0 tag (scripts/fetch-ttnn-sdk.sh); the sidecar links
# them through an rpath to /opt/ttnn-sdk/wheel, which the runtime stage carries at the same path. Ubuntu 24.04
# (libmsgpack-cxx-dev; glibc for node 20 and the wheel's manylinux_2_34):
#   docker build -t rfdetr-serve:tt --build-arg BUILD_BASE=ubuntu:24.04 --build-arg RUNTIME_BASE=ubuntu:24.04 \
#     --build-arg RFDETR_TTNN_VERSION=0.78.0 \
#     --build-arg RFDETR_CMAKE_ARGS="-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF -DRFDETR_TTNN_HEADERS=/opt/ttnn-sdk/headers -DRFDETR_TTNN_WHEEL=/opt/ttnn-sdk/wheel" .
#   docker run --rm -p 20000:20000 --device /dev/tenstorrent/0 -v /dev/hugepages-1G:/dev/hugepages-1G \
#     -v rfdetr-cache:/var/cache/rfdetr rfdetr-serve:tt --host 0.0.0.0 --port 20000 --engine tt
# (Or build on an image with a built tt-metal tree: BUILD_BASE/RUNTIME_BASE=<that image>, TT_METAL_HOME set,
# RFDETR_CMAKE_ARGS="-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF", no RFDETR_TTNN_VERSION.)
# Verified on the project's machines (no GitHub there): this file's TT build on debian:bookworm-slim with
# tt-metal headers of 0.70.1's API generation (../shared/ttnn-sdk, staged into scripts/image/ttnn-headers/ and
# named by RFDETR_TTNN_HEADERS_TARBALL) and the ttnn 0.70.1 wheel, i.e. linked against 0.70.1, not the 0.78.0
# pin; every call of that build checked against 0.78.0's exports (scripts/image-build.sh tt, image-smoke.sh tt).
# Not verified: the v0.78.0 GitHub path above, the ubuntu:24.04 bases, a compile against 0.78.0's headers, a card.

# Node (>= 20.18.1): copied out of the official image as files, so both bases get the same node. 22, not 20: node
# 20 left maintenance in April 2026, and PyPI (where scripts/image-build.sh takes node from when no registry is
# reachable) has no node 20 at or past 20.18.1.
ARG NODE_IMAGE=node:22-bookworm-slim
ARG BUILD_BASE=debian:bookworm-slim
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${NODE_IMAGE} AS node

#############################################################
# ttnn-sdk: the ttnn wheel's libraries + tt-metal's release headers (empty for a CPU build)
#############################################################
FROM ${BUILD_BASE} AS ttnn-sdk
ARG RFDETR_TTNN_VERSION=""
# A file name in scripts/image/ttnn-headers/ (a tt-metal-headers-*.tar.xz staged there by scripts/image-build.sh
# from ../shared/ttnn-sdk): its headers instead of a clone of tt-metal's tag from GitHub. It must match
# RFDETR_TTNN_VERSION's API generation (../shared/ttnn-sdk's: 0.70.1).
ARG RFDETR_TTNN_HEADERS_TARBALL=""
COPY scripts/fetch-ttnn-sdk.sh /tmp/fetch-ttnn-sdk.sh
COPY scripts/image/ttnn-headers/ /tmp/ttnn-headers/
RUN bash /tmp/fetch-ttnn-sdk.sh /opt/ttnn-sdk "${RFDETR_TTNN_VERSION}" \
      ${RFDETR_TTNN_HEADERS_TARBALL:+"/tmp/ttnn-headers/${RFDETR_TTNN_HEADERS_TARBALL}"}

#############################################################
# build: npm ci (which builds the sidecar through scripts/build-sidecar.sh), then stage /opt/rfdetr
#############################################################
FROM ${BUILD_BASE} AS build
# node and the npm/npx links as the official image has them (a directory copy keeps the links). Not npm/bin on
# PATH: npm/bin/npm is the Windows installer's shim, which looks for npm beside node and fails here ("Could not
# determine Node.js install directory"; found by the first real build, with podman).
COPY --from=node /usr/local/bin /usr/local/bin
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
COPY --from=ttnn-sdk /opt/ttnn-sdk /opt/ttnn-sdk
# build-sidecar.sh apt-installs the compiler, CMake, Ninja, OpenBLAS and the headers it needs (root here).
ARG RFDETR_CMAKE_ARGS="-DRFDETR_BUILD_TESTS=OFF"
ENV RFDETR_CMAKE_ARGS=${RFDETR_CMAKE_ARGS}
# The commit BUILD-INFO.json names (.git is not in the build context): scripts/image-build.sh passes it. Build
# args are in the environment of the RUN steps after them (container-build.sh reads RFDETR_COMMIT).
ARG RFDETR_COMMIT=""
WORKDIR /src
COPY . .
RUN bash scripts/container-build.sh --dest /opt/rfdetr

#############################################################
# runtime: node, the staged tree, the libraries the sidecar links, a non-root user
#############################################################
FROM ${RUNTIME_BASE} AS runtime
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=build /opt/rfdetr/runtime-packages.txt /tmp/runtime-packages.txt
COPY scripts/container-runtime-setup.sh /tmp/container-runtime-setup.sh
# 1: Debian's ffmpeg for video inputs (`rfdetr detect` on videos). Off by default: it adds ~450 MB (measured on
# debian:bookworm-slim with --no-install-recommends; SERVING.md, "Container image"); still images never need it.
ARG RFDETR_WITH_FFMPEG=0
RUN bash /tmp/container-runtime-setup.sh /tmp/runtime-packages.txt
COPY --from=build /opt/rfdetr /opt/rfdetr
# The libraries the TT sidecar's rpath names (nothing for a CPU build); headers stay in the build stage.
COPY --from=ttnn-sdk /opt/ttnn-sdk/wheel /opt/ttnn-sdk/wheel

ENV PATH=/opt/rfdetr/bin:${PATH} \
    NODE_ENV=production \
    HOME=/var/lib/rfdetr \
    HF_HOME=/var/cache/rfdetr/huggingface \
    TT_METAL_CACHE=/var/cache/rfdetr/tt-metal \
    HF_MODEL=Roboflow/rf-detr-base \
    TT_WEIGHTS_REVISION=7b95b089788e6c7db56d5ea9b0a07ca08ea6ac0a
VOLUME ["/var/cache/rfdetr"]
USER rfdetr
WORKDIR /var/lib/rfdetr
EXPOSE 20000
# Readiness, not /health (200 while starting). The start period covers a cold kernel compile on a card.
# Another --port: set RFDETR_HEALTHCHECK_URL=http://127.0.0.1:<port>/ready.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30m --retries=3 \
    CMD ["node", "/opt/rfdetr/scripts/healthcheck.mjs"]
# PID 1 is node (the exec in bin/rfdetr): the rfdetr CLI installs SIGTERM/SIGINT handlers, drains, stops the
# sidecar (which releases the device) and exits 0, and node reaps the sidecar it spawned. `docker run --init`
# is not needed; it does no harm.
STOPSIGNAL SIGTERM
ENTRYPOINT ["rfdetr", "serve"]
CMD ["--host", "0.0.0.0", "--port", "20000"]
