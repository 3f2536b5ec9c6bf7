// What the REST routes read and act through: the head's parts, built by head_daemon.cc.
// Each route class keeps a copy (references only). Io thread only.
#pragma once

#include <cstdint>
#include <string>

#include <boost/asio/io_context.hpp>

#include "common/clock.h"
#include "head/leader/head_role.h"
#include "head/auth/access_control.h"
#include "head/auth/audit_log.h"
#include "head/dashboard/dashboard_routes.h"
#include "head/exec/stack_taker.h"
#include "head/gateway/worker_gateway.h"
#include "head/jobs/job_layer.h"
#include "head/logs/log_store.h"
#include "head/nodes/image_pulls.h"
#include "head/nodes/node_registry.h"
#include "head/packages/package_store.h"
#include "head/webhooks/webhook_dispatcher.h"
#include "head/webhooks/webhook_store.h"

namespace ag::head {

struct RestDeps {
  boost::asio::io_context& io;
  JobLayer& jobs;
  NodeRegistry& nodes;
  LogStore& logs;
  PackageStore& packages;
  AccessControl& access;
  AuditLog& audit;
  WorkerGateway& gateway;
  const Clock& clock;
  dashboard::DashboardRoutes& dashboard;
  ImagePulls& pulls;
  const HeadRole& role;
  StackTaker& stacks;
  WebhookStore& webhooks;
  WebhookDispatcher& deliveries;
};

}  // namespace ag::head
