# banyan on Debian 12: the build dependencies from scripts/setup.sh, a Release build of the
# `banyan` tool, and iproute2 for the site shaping of docker/ (scripts/cluster/shape.sh).
# See docs/cluster.md, "Containers" (also for making the debian:12 base image offline).
#
#   docker build -t banyan .                      # JOBS=2 compile jobs; --build-arg JOBS=N
#   docker run --rm banyan banyan topology paper-3c201
#   docker-compose -f docker/compose.yml up -d    # the three-site demo cluster
FROM debian:12
ARG JOBS=2
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      ca-certificates iproute2 procps && rm -rf /var/lib/apt/lists/*
WORKDIR /src/banyan
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
# Only what the build of `banyan` reads, so that editing docker/ or scripts/ does not rebuild.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY core core
COPY schema schema
COPY net net
COPY actors actors
COPY demos demos
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBANYAN_BUILD_TESTS=OFF \
 && cmake --build build -j"${JOBS}" --target banyan \
 && install -m 0755 build/demos/cli/banyan /usr/local/bin/banyan \
 && rm -rf build
COPY scripts scripts
COPY docker docker
ENTRYPOINT []
CMD ["banyan", "--help"]
