# An image for one of the test programs (static Go executables built on the host):
#   buildah bud -f images/test-program.Dockerfile --build-arg PROGRAM=e2e/cluster/bin/kshard-e2e-app .
# images/build.sh builds one per program it names; BASE=scratch for the pod sandbox's kshard-pause.
ARG BASE=debian:12-slim
FROM ${BASE}
ARG PROGRAM
COPY ${PROGRAM} /usr/local/bin/kshard-test-program
ENTRYPOINT ["/usr/local/bin/kshard-test-program"]
