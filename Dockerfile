# banyan on Debian 12, in stages (docs/cluster.md, "Containers"):
#   build    compiler and -dev packages; builds shared libraries and the `banyan` tool
#   library  for embedders: headers, libraries, CMake config and banyan.pc under /usr
#            (FROM banyan:lib, then find_package(banyan) or pkg-config banyan)
#   demo     runtime + iproute2 and the scripts of docker/ (docker/compose.yml's image)
#   runtime  (default) debian:12-slim with the runtime libraries and `banyan` only,
#            running as the unprivileged user banyan, with a HEALTHCHECK on the node's
#            --json-status file (`banyan health`)
#
#   docker build -t banyan .                       # runtime; JOBS=2 compile jobs (--build-arg JOBS=N)
#   docker build --target library -t banyan:lib .
#   docker build --target demo -t banyan:demo .
#   docker image inspect banyan --format '{{.Size}}'
FROM debian:12 AS build
ARG JOBS=2
ENV DEBIAN_FRONTEND=noninteractive
WORKDIR /src/banyan
COPY scripts/setup.sh scripts/setup.sh
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends ca-certificates \
 && bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
# Only what the build reads, so that editing docker/ or scripts/ does not rebuild.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY core core
COPY schema schema
COPY net net
COPY actors actors
COPY demos demos
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DBANYAN_BUILD_TESTS=OFF \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr \
 && cmake --build build -j"${JOBS}" \
 && DESTDIR=/out/runtime cmake --install build --component lib \
 && DESTDIR=/out/runtime cmake --install build --component cli \
 && DESTDIR=/out/library cmake --install build --component lib \
 && DESTDIR=/out/library cmake --install build --component dev \
 && find /out/runtime -type f \( -name banyan -o -name 'libbanyan_*.so.*' \) \
      -exec strip --strip-unneeded {} + \
 && rm -rf build

# What an embedding project builds against: the -dev packages banyan's config finds,
# and banyan's headers, libraries, CMake package and pkg-config file.
FROM debian:12 AS library
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      g++ cmake make pkg-config libcaf-dev libcapnp-dev capnproto libuv1-dev libssl-dev libgcrypt20-dev \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/library/ /

# The runtime libraries of banyan's dependencies, nothing to build with.
FROM debian:12-slim AS runtime-base
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libcaf-core0.17 libcaf-io0.17 libcapnp-0.9.2 libuv1 libssl3 libgcrypt20 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home --home-dir /nonexistent banyan \
 && install -d -o banyan -g banyan -m 0755 /run/banyan
COPY --from=build /out/runtime/ /

# docker/compose.yml's three-site cluster: shapes its link with tc (iproute2) as root,
# then runs the node as banyan (docker/node.sh).
FROM runtime-base AS demo
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends iproute2 \
 && rm -rf /var/lib/apt/lists/*
COPY scripts/cluster /src/banyan/scripts/cluster
COPY docker /src/banyan/docker
HEALTHCHECK --interval=5s --timeout=3s --start-period=30s --retries=3 \
  CMD ["banyan", "health", "/run/banyan/status.json"]
ENTRYPOINT ["bash", "/src/banyan/docker/node.sh"]

# The default image: `banyan node` as an unprivileged user. Its status file is
# /run/banyan/status.json (pass --json-status there); healthy = a member.
FROM runtime-base AS runtime
USER banyan:banyan
WORKDIR /run/banyan
EXPOSE 7000
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["banyan", "health", "/run/banyan/status.json"]
ENTRYPOINT ["banyan"]
CMD ["--help"]
