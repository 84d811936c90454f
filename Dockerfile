# banyan on Debian 12: the build dependencies from scripts/setup.sh, a Release build, and
# iproute2 for the site shaping of docker/ (scripts/cluster/shape.sh). See docs/cluster.md.
#
#   docker build -t banyan .
#   docker run --rm banyan banyan topology paper-3c201
#   docker compose -f docker/compose.yml up          # the three-site demo cluster
FROM debian:12
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      ca-certificates iproute2 procps sudo && rm -rf /var/lib/apt/lists/*
WORKDIR /src/banyan
COPY scripts/setup.sh scripts/setup.sh
RUN bash scripts/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN rm -rf build* out \
 && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build -j"$(nproc)" --target banyan \
 && install -m 0755 build/demos/cli/banyan /usr/local/bin/banyan
ENTRYPOINT []
CMD ["banyan", "--help"]
