# syntax=docker/dockerfile:1
# rfdetr-serve: `rfdetr serve` with its sidecar. Written and reviewed, not built on the project's machines (no
# Docker engine there): every RUN below is a script in scripts/ that the tests run outside Docker.
#
# CPU engine (plain Debian):
#   docker build -t rfdetr-serve:cpu .
#   docker run --rm -p 20000:20000 -v rfdetr-cache:/var/cache/rfdetr rfdetr-serve:cpu --host 0.0.0.0 --port 20000
#
# TT engine (Blackhole): build on an image that holds a built tt-metal tree at TT_METAL_HOME (default
# /opt/tt-metal; its libraries and their dependencies are left to that image), pinned to
# v0.78.0-dev20260820-25 (commit 8b98410e730), Ubuntu 24.04 (libmsgpack-cxx-dev; glibc for node 20):
#   docker build -t rfdetr-serve:tt \
#     --build-arg BUILD_BASE=<tt-metal image> --build-arg RUNTIME_BASE=<tt-metal image> \
#     --build-arg RFDETR_CMAKE_ARGS="-DRFDETR_WITH_TTNN=ON -DRFDETR_BUILD_TESTS=OFF" .
#   docker run --rm -p 20000:20000 --device /dev/tenstorrent/0 -v /dev/hugepages-1G:/dev/hugepages-1G \
#     -v rfdetr-cache:/var/cache/rfdetr rfdetr-serve:tt --host 0.0.0.0 --port 20000 --engine tt

# Node (>= 20.18.1): copied out of the official image as files, so both bases get the same node.
ARG NODE_IMAGE=node:20-bookworm-slim
ARG BUILD_BASE=debian:bookworm-slim
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${NODE_IMAGE} AS node

#############################################################
# build: npm ci (which builds the sidecar through scripts/build-sidecar.sh), then stage /opt/rfdetr
#############################################################
FROM ${BUILD_BASE} AS build
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/npm
# build-sidecar.sh apt-installs the compiler, CMake, Ninja, OpenBLAS and the headers it needs (root here).
ARG RFDETR_CMAKE_ARGS="-DRFDETR_BUILD_TESTS=OFF"
ENV RFDETR_CMAKE_ARGS=${RFDETR_CMAKE_ARGS}
ENV PATH=/usr/local/lib/node_modules/npm/bin:${PATH}
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
RUN bash /tmp/container-runtime-setup.sh /tmp/runtime-packages.txt
COPY --from=build /opt/rfdetr /opt/rfdetr

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
