// What the head shows people about the cluster: Prometheus' text format for
// /metrics and the JSON the dashboard, `rayx status --format json` and
// `rayx list --format json` read.
#pragma once

#include <string>

#include "head/head_service.h"

namespace rayx::scheduler {

// Every metric the head exports, in Prometheus' text exposition format
// (version 0.0.4): names start with `rayx_`, counters end in `_total`, sizes
// are bytes and times seconds. O(nodes + leases + groups) per call.
std::string PrometheusText(const HeadService& head);

// {"status": ClusterStatus, "nodes"/"leases"/"placement_groups": ListStateReply's,
//  "jobs": [JobInfo], "enums": {names of the wire enums by value}}.
std::string StateJson(const HeadService& head);

}  // namespace rayx::scheduler
