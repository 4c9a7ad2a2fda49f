# kshard images, built from one multi-stage file:
#   docker build --target operator -t kshard/operator:dev .
#   docker build --target sidecar  -t kshard/sidecar:dev .
#   docker build --target counter  -t kshard/counter:dev .
#   docker build --target kshardctl -t kshard/kshardctl:dev .   (the chart's helm test)
# `make images` (images/build.sh) builds them all daemonless with buildah, from base images it
# makes locally, and writes OCI archives.
# The build stage compiles everything once (release preset); each runtime stage is Debian slim
# with only the shared libraries the binaries need, running as a non-root user.
# BINARIES=host takes the executables of the host's own release build (`make build`) instead of
# compiling them again: for a Debian 12 host only, whose shared libraries are the image's
# (images/build.sh does it with images/host.dockerignore, which lets build/images/bin in).
ARG BINARIES=build

FROM debian:12 AS build
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build ca-certificates \
      libcpprest-dev libboost-dev libssl-dev zlib1g-dev libyaml-cpp-dev nlohmann-json3-dev \
      prometheus-cpp-dev libgtest-dev libgmock-dev libbenchmark-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset release -DKSHARD_BUILD_TESTS=OFF -DKSHARD_BUILD_BENCH=OFF \
    && cmake --build --preset release --target kshard-operator kshard-sidecar kshard-counter kshardctl \
    && mkdir /out && for bin in kshard-operator kshard-sidecar kshard-counter kshardctl; do \
         strip --strip-debug -o "/out/$bin" "build/bin/$bin"; done

# images/build.sh puts the host's executables here, without their debug information as above.
FROM scratch AS host
COPY build/images/bin/ /out/

FROM ${BINARIES} AS binaries

FROM debian:12-slim AS runtime
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      ca-certificates libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 libssl3 \
      libboost-system1.74.0 \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 65532 kshard \
    && useradd --system --uid 65532 --gid kshard --no-create-home --shell /usr/sbin/nologin kshard
USER 65532:65532

FROM runtime AS operator
COPY --from=binaries /out/kshard-operator /usr/local/bin/kshard-operator
EXPOSE 7200 7202 9443
ENTRYPOINT ["/usr/local/bin/kshard-operator"]

FROM runtime AS sidecar
COPY --from=binaries /out/kshard-sidecar /usr/local/bin/kshard-sidecar
# glibc keeps 7 freed chunks per size in each thread's cache by default; a sidecar thread has
# a dozen messages in flight, each holding several chunks of the same sizes, so the cache ran
# dry and most allocations took the arena's slow path (docs/benchmarks-history.md, "Step 6").
# bench/datapath/run.sh reads this line, so that it measures the sidecar as this image runs it.
ENV GLIBC_TUNABLES=glibc.malloc.tcache_count=256
EXPOSE 7100 7101 7102
ENTRYPOINT ["/usr/local/bin/kshard-sidecar"]

FROM runtime AS counter
COPY --from=binaries /out/kshard-counter /usr/local/bin/kshard-counter
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/kshard-counter"]

FROM runtime AS kshardctl
COPY --from=binaries /out/kshardctl /usr/local/bin/kshardctl
ENTRYPOINT ["/usr/local/bin/kshardctl"]
