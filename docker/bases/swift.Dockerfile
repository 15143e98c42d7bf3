# A stand-in for the official Swift image, for a machine that has a Swift toolchain but no
# registry: a Debian base plus the packages the toolchain needs. The toolchain itself is not
# in the image; the build mounts it (scripts/container-test):
#   podman build -f docker/bases/swift.Dockerfile --build-arg BASE_IMAGE=<local bookworm> -t swift-local .
#   podman build -v /opt/swift:/opt/swift:ro --build-arg SWIFT_IMAGE=swift-local ...
# The toolchain must be one built for the same Debian release (bookworm).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       binutils ca-certificates git gnupg2 libc6-dev libcurl4 libedit2 libgcc-12-dev \
       libncurses6 libpython3.11 libsqlite3-0 libstdc++-12-dev libxml2 libz3-4 pkg-config \
       tzdata unzip zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
