#pragma once
/// A node's metrics (`node::metrics()`) as Prometheus metric families, and as the text a
/// scrape of `GET /metrics` gets: `banyan node --metrics` serves exactly this, and a
/// program embedding `banyan::node` can serve it the same way (net/metrics_server.hpp).
/// Every name starts with `banyan_`; docs/observability.md lists them all with their
/// labels and meaning. Pure: no I/O.
///
///     net::metrics_server srv({"127.0.0.1", 9464}, [&] { return prometheus_text(n.metrics()); }, log);

#include <string>
#include <vector>

#include "banyan/actors/node.hpp"
#include "banyan/net/prometheus_text.hpp"

namespace banyan {

/// The families, in a fixed order (counters with every label combination they can take,
/// zeros included, so that a rate is defined from the first scrape on).
std::vector<net::metric_family> metric_families(const node_metrics& m);

/// `net::render_prometheus(metric_families(m))`.
std::string prometheus_text(const node_metrics& m);

} // namespace banyan
