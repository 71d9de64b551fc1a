# One image for every role of a tpuemu pod: tpuemu-coordinator, tpuemu-worker
# and the tpuemu CLI (which also probes health: `tpuemu health HOST:PORT`).
#
#   docker build -t tpuemu .                          compile in the build stage (users)
#   scripts/image.sh                                  the same, with docker or podman
#   scripts/image.sh --from-host                      BINARIES=host: take the binaries a
#       Debian 12 host already built (build/image/, stripped by that script), so the tests
#       do not compile the project twice on 2 cores; the runtime stage is the same.
ARG BINARIES=build

# ---- build: the project's own setup, then only the three binaries ----------
FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh build && rm -rf /var/lib/apt/lists/*
COPY CMakeLists.txt ./
COPY cmake cmake
COPY proto proto
COPY core core
COPY services services
COPY views views
COPY web web
COPY worker worker
COPY coordinator coordinator
COPY client client
RUN cmake -S . -B /out -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPUEMU_BUILD_TESTS=OFF >/dev/null \
 && cmake --build /out --target tpuemu tpuemu-worker tpuemu-coordinator \
 && strip /out/bin/tpuemu /out/bin/tpuemu-worker /out/bin/tpuemu-coordinator

FROM scratch AS binaries-build
COPY --from=build /out/bin/tpuemu /out/bin/tpuemu-worker /out/bin/tpuemu-coordinator /

FROM scratch AS binaries-host
COPY build/image/tpuemu build/image/tpuemu-worker build/image/tpuemu-coordinator /

FROM binaries-${BINARIES} AS binaries

# ---- runtime: the libraries the binaries link, nothing to compile with -----
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 libblis4-openmp libgomp1 \
      libyaml-cpp0.7 libspdlog1.10 libfmt9 libc-ares2 libre2-9 libssl3 libsqlite3-0 libcpp-httplib0.11 ca-certificates \
      librsvg2-2 libcairo2 fonts-dejavu-core \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && groupadd --system --gid 10001 tpuemu \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/tpuemu --create-home tpuemu \
 && install -d -o 10001 -g 10001 /var/lib/tpuemu/checkpoints
COPY --from=binaries /tpuemu /tpuemu-worker /tpuemu-coordinator /usr/local/bin/
USER 10001:10001
WORKDIR /var/lib/tpuemu
ENV TPUEMU_HOME=/var/lib/tpuemu
# 50051: the coordinator's gRPC port; 8471: a worker's (WorkerService and PeerService); 9090:
# the web view and metrics (TPUEMU_HTTP_PORT).
EXPOSE 50051 8471 9090
CMD ["tpuemu", "--help"]
