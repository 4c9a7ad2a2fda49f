# Images of the SDK examples (examples/README.md), built by images/build.sh with
# images/host.dockerignore as the context's filter:
#   buildah bud -f images/sdk-examples.Dockerfile --target go-counter     -t kshard/go-counter:dev .
#   buildah bud -f images/sdk-examples.Dockerfile --target python-counter -t kshard/python-counter:dev .
# Both run as 65532:65532, as kshard/counter does; their state directory's default
# (/tmp/kshard-counter-state) is writable by that user.
ARG BASE=debian:12-slim

# The Go counter: a static executable built on the host (images/build.sh, with the test programs'
# Go settings), in the test programs' base.
FROM ${BASE} AS go-counter
COPY build/examples/bin/kshard-go-counter /usr/local/bin/kshard-go-counter
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/kshard-go-counter"]

# The Python counter: the SDK and the example as source, on Debian's python3 (python3-minimal
# lacks json and http.server, which the SDK needs), installed from the Debian archive in a layer
# that buildah's layer cache keeps while the base image stays, like the Dockerfile's runtime stage.
# Measured on the 2-core development VM (load ≈ 10, images/build.sh under nice): this image takes
# 21 s without that layer in the cache, archive included, and 1 s with it. A second mmdebstrap base
# with python3 (--include=python3) took 99 s for the root file system alone, the same 1 s once made,
# and would be a base layer of its own on the node instead of debian:12-slim's, which is shared.
FROM ${BASE} AS python-counter
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 \
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY sdk/python/kshard/ /opt/kshard/sdk/python/kshard/
COPY examples/python-counter/main.py examples/python-counter/counter.py \
     examples/python-counter/store.py /opt/kshard/examples/python-counter/
# Compiled once here: the user cannot write __pycache__ beside the sources.
RUN python3 -m compileall -q /opt/kshard
USER 65532:65532
EXPOSE 8080 8081
ENTRYPOINT ["python3", "/opt/kshard/examples/python-counter/main.py"]
