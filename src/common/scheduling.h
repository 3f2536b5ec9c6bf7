// How AetherGrid's daemons share the CPU with the tasks they run. The head, the worker
// agent and the task supervisor run under SCHED_BATCH: the same share of CPU time as
// any process, but a daemon that wakes (a message, a timer, a task's end) does not
// preempt the process running on that CPU; it runs at the next scheduling point, at
// most a time slice later. A job's start is a chain of wake-ups (client -> head ->
// agent -> supervisor -> task) and each of its messages wakes a daemon while tasks
// run: preempting, each wake-up would stall the step before it and push running tasks
// off their CPU. The processes started for users (tasks, `ag exec` commands) get
// SCHED_OTHER back before they run.
#pragma once

#include <string>

namespace ag {

// Every thread of this process, and those it starts afterwards, to SCHED_BATCH.
// Returns "" or why not (the process then runs as before).
std::string yield_to_tasks();

// Whether this thread runs under SCHED_BATCH, as yield_to_tasks sets it: what a process
// started for a user must reset. A policy the daemon was started under instead (an
// operator's `chrt --idle`, which an account without CAP_SYS_NICE cannot leave) is
// its tasks' too, as it was before the daemons yielded.
bool runs_as_daemon();

}  // namespace ag
