// `ag doctor`: a pre-flight any user can run from any machine. It checks that the head
// answers, that its certificate matches the CA pinned for it, that the token works and
// that this machine's clock agrees with the head's; with --nodes N it runs a tiny job
// across N nodes whose ranks connect to rank 0's master port and report what their
// node looks like (cli/doctor_findings.h says what each finding means). Prints a
// checklist (or JSON with -o json); exits 1 when a check failed.
#pragma once

#include "cli/session.h"

namespace ag::cli {

struct DoctorOptions {
  int nodes = 0;            // ranks of the probe job, one a node; 0: no probe
  bool gpus = false;        // the probe asks each rank for a GPU and checks torch, CUDA, NCCL
  double timeout_s = 60;    // how long the probe may wait to start and run
};

int doctor(const ConnectionOptions& options, const DoctorOptions& doctor);

}  // namespace ag::cli
